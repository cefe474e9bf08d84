// DictdDatabase: a dictionary in the dictd format, as Debian's dict-* packages install it:
//   NAME.index: one line per headword, "headword<TAB>offset<TAB>length", the numbers in dictd's
//               base64 (digits A–Z a–z 0–9 + /, most significant first);
//   NAME.dict or NAME.dict.dz: the entries' text (.dz is dictzip, i.e. gzip: read through zlib).
// entries() lists each distinct (offset, length) block once, in file order, leaving out the
// database's own "00-database-*" style records (headwords starting with "00-").
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace linea::data {

// Decodes a dictd base64 number; throws std::invalid_argument on a character outside the alphabet.
int64_t decode_dictd_number(std::string_view digits);

class DictdDatabase {
 public:
  struct Entry {
    std::string headword;  // the first headword that points at this block
    int64_t offset = 0, length = 0;
  };
  // Throws std::runtime_error naming the file (and the index line) when either is malformed or an
  // entry reaches past the end of the text.
  DictdDatabase(const std::filesystem::path& index_file, const std::filesystem::path& dict_file);

  const std::vector<Entry>& entries() const { return entries_; }
  std::string_view text(const Entry& e) const { return std::string_view(text_).substr(e.offset, e.length); }
  int64_t text_bytes() const { return static_cast<int64_t>(text_.size()); }

 private:
  std::vector<Entry> entries_;
  std::string text_;
};

}  // namespace linea::data
