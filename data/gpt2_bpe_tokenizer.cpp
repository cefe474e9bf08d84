#include "data/gpt2_bpe_tokenizer.h"

#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "data/atomic_file.h"
#include "data/gpt2_pretokenizer.h"
#include "data/unicode_classes.h"

namespace linea::data {

const std::array<uint32_t, 256>& gpt2_byte_to_unicode() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    const auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) t[b] = printable(b) ? static_cast<uint32_t>(b) : next++;
    return t;
  }();
  return table;
}

Gpt2BpeTokenizer::Gpt2BpeTokenizer(const std::filesystem::path& dir) {
  const auto vocab_path = dir / "vocab.json";
  const auto merges_path = dir / "merges.txt";
  const std::string vocab_name = vocab_path.string();

  // vocab.json: {"token": id, ...}, ids exactly 0..n-1.
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(read_file(vocab_path));
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error("tokenizer file " + vocab_name + ": not valid JSON (" + e.what() + ")");
  }
  if (!vocab.is_object() || vocab.empty()) {
    throw std::runtime_error("tokenizer file " + vocab_name + ": expected a non-empty JSON object token → id");
  }
  std::unordered_map<std::string, int32_t> id_of;
  std::vector<std::string> symbol(vocab.size());
  std::vector<bool> seen(vocab.size(), false);
  for (const auto& [token, value] : vocab.items()) {
    const int64_t id = value.is_number_integer() ? value.get<int64_t>() : -1;
    if (id < 0 || id >= static_cast<int64_t>(vocab.size()) || seen[id]) {
      throw std::runtime_error("tokenizer file " + vocab_name + ": token \"" + token + "\" has id " + value.dump() +
                               "; expected ids 0.." + std::to_string(vocab.size() - 1) + ", each used once");
    }
    seen[id] = true;
    symbol[id] = token;
    id_of.emplace(token, static_cast<int32_t>(id));
  }
  const auto& byte_to_unicode = gpt2_byte_to_unicode();
  for (int b = 0; b < 256; ++b) {
    std::string s;
    append_utf8(byte_to_unicode[b], s);
    const auto it = id_of.find(s);
    if (it == id_of.end()) {
      throw std::runtime_error("tokenizer file " + vocab_name + ": no token for byte " + std::to_string(b) + " (\"" +
                               s + "\"); a byte-level vocabulary must hold all 256");
    }
    byte_id_[b] = it->second;
  }
  const auto eos = id_of.find(kEndOfText);
  if (eos == id_of.end()) {
    throw std::runtime_error("tokenizer file " + vocab_name + ": no \"" + std::string(kEndOfText) + "\" token");
  }
  eos_id_ = eos->second;

  // What each id decodes to: its code points mapped back to bytes (others kept as UTF-8).
  std::unordered_map<uint32_t, char> unicode_to_byte;
  for (int b = 0; b < 256; ++b) unicode_to_byte[byte_to_unicode[b]] = static_cast<char>(b);
  token_bytes_.resize(symbol.size());
  for (size_t id = 0; id < symbol.size(); ++id) {
    const std::string& s = symbol[id];
    for (size_t pos = 0; pos < s.size();) {
      int len;
      const uint32_t cp = decode_utf8(s, pos, &len);
      const auto it = unicode_to_byte.find(cp);
      if (it != unicode_to_byte.end()) {
        token_bytes_[id].push_back(it->second);
      } else {
        token_bytes_[id].append(s, pos, static_cast<size_t>(len));
      }
      pos += static_cast<size_t>(len);
    }
  }

  // merges.txt
  std::istringstream merges(read_file(merges_path));
  std::string line;
  int64_t line_no = 0;
  int32_t rank = 0;
  while (std::getline(merges, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const auto where = [&] { return "tokenizer file " + merges_path.string() + " line " + std::to_string(line_no); };
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos) {
      throw std::runtime_error(where() + ": expected two symbols separated by one space, got \"" + line + "\"");
    }
    const std::string left = line.substr(0, space), right = line.substr(space + 1);
    const auto l = id_of.find(left), r = id_of.find(right), m = id_of.find(left + right);
    if (l == id_of.end() || r == id_of.end() || m == id_of.end()) {
      const std::string& missing = l == id_of.end() ? left : r == id_of.end() ? right : left + right;
      throw std::runtime_error(where() + ": \"" + missing + "\" is not in " + vocab_name);
    }
    merges_.emplace(pair_key(l->second, r->second), Merge{rank++, m->second});  // first occurrence wins
  }
}

void Gpt2BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  std::vector<int32_t> symbols;
  symbols.reserve(piece.size());
  for (char c : piece) symbols.push_back(byte_id_[static_cast<unsigned char>(c)]);
  while (symbols.size() > 1) {
    // The pair with the lowest rank...
    const Merge* best = nullptr;
    int32_t best_left = 0, best_right = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = merges_.find(pair_key(symbols[i], symbols[i + 1]));
      if (it != merges_.end() && (!best || it->second.rank < best->rank)) {
        best = &it->second;
        best_left = symbols[i];
        best_right = symbols[i + 1];
      }
    }
    if (!best) break;
    // ...is merged at every occurrence, left to right.
    size_t w = 0;
    for (size_t i = 0; i < symbols.size(); ++w) {
      if (i + 1 < symbols.size() && symbols[i] == best_left && symbols[i + 1] == best_right) {
        symbols[w] = best->merged;
        i += 2;
      } else {
        symbols[w] = symbols[i++];
      }
    }
    symbols.resize(w);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
}

std::vector<int32_t> Gpt2BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  for (std::string_view piece : gpt2_pretokenize(text)) encode_piece(piece, ids);
  return ids;
}

std::string Gpt2BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) {
      throw std::out_of_range("GPT-2 BPE decode: id " + std::to_string(id) + " outside [0, " +
                              std::to_string(vocab_size()) + ")");
    }
    text += token_bytes_[id];
  }
  return text;
}

}  // namespace linea::data
