#include "data/dictd_database.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "data/compressed_file_reader.h"

namespace linea::data {

int64_t decode_dictd_number(std::string_view digits) {
  if (digits.empty() || digits.size() > 10) {
    throw std::invalid_argument("dictd number \"" + std::string(digits) + "\": expected 1 to 10 base64 digits");
  }
  int64_t value = 0;
  for (char c : digits) {
    int d;
    if (c >= 'A' && c <= 'Z') {
      d = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      d = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      d = c - '0' + 52;
    } else if (c == '+') {
      d = 62;
    } else if (c == '/') {
      d = 63;
    } else {
      throw std::invalid_argument("dictd number \"" + std::string(digits) + "\": '" + std::string(1, c) +
                                  "' is not a base64 digit");
    }
    value = value * 64 + d;
  }
  return value;
}

DictdDatabase::DictdDatabase(const std::filesystem::path& index_file, const std::filesystem::path& dict_file)
    : text_(read_decompressed(dict_file)) {
  LineReader lines(index_file);
  std::string line;
  std::set<std::pair<int64_t, int64_t>> seen;
  while (lines.next(line)) {
    const auto where = [&] {
      return "dictd index " + index_file.string() + " line " + std::to_string(lines.line_number());
    };
    const size_t tab1 = line.find('\t');
    const size_t tab2 = tab1 == std::string::npos ? tab1 : line.find('\t', tab1 + 1);
    if (tab2 == std::string::npos) throw std::runtime_error(where() + ": expected headword<TAB>offset<TAB>length");
    Entry e;
    e.headword = line.substr(0, tab1);
    const size_t tab3 = line.find('\t', tab2 + 1);  // some indexes carry extra columns
    try {
      e.offset = decode_dictd_number(std::string_view(line).substr(tab1 + 1, tab2 - tab1 - 1));
      e.length = decode_dictd_number(
          std::string_view(line).substr(tab2 + 1, tab3 == std::string::npos ? tab3 : tab3 - tab2 - 1));
    } catch (const std::invalid_argument& err) {
      throw std::runtime_error(where() + ": " + err.what());
    }
    if (e.offset + e.length > text_bytes()) {
      throw std::runtime_error(where() + ": entry [" + std::to_string(e.offset) + ", +" + std::to_string(e.length) +
                               ") reaches past the end of " + dict_file.string() + " (" + std::to_string(text_bytes()) +
                               " bytes)");
    }
    if (e.headword.rfind("00-", 0) == 0 || !seen.emplace(e.offset, e.length).second) continue;
    entries_.push_back(std::move(e));
  }
  std::stable_sort(entries_.begin(), entries_.end(),
                   [](const Entry& a, const Entry& b) { return a.offset < b.offset; });
}

}  // namespace linea::data
