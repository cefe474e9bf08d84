#include "data/gpt2_bpe_tokenizer.h"

#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "data/atomic_file.h"
#include "data/pretokenizer.h"
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

std::string gpt2_symbol_bytes(std::string_view symbol) {
  static const std::unordered_map<uint32_t, char> unicode_to_byte = [] {
    std::unordered_map<uint32_t, char> m;
    for (int b = 0; b < 256; ++b) m[gpt2_byte_to_unicode()[b]] = static_cast<char>(b);
    return m;
  }();
  std::string bytes;
  for (size_t pos = 0; pos < symbol.size();) {
    int len;
    const uint32_t cp = decode_utf8(symbol, pos, &len);
    const auto it = unicode_to_byte.find(cp);
    if (it != unicode_to_byte.end()) {
      bytes.push_back(it->second);
    } else {
      bytes.append(symbol, pos, static_cast<size_t>(len));
    }
    pos += static_cast<size_t>(len);
  }
  return bytes;
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
  }
  const auto eos = id_of.find(kEndOfText);
  if (eos == id_of.end()) {
    throw std::runtime_error("tokenizer file " + vocab_name + ": no \"" + std::string(kEndOfText) + "\" token");
  }
  eos_id_ = eos->second;
  std::vector<std::string> token_bytes(symbol.size());
  for (size_t id = 0; id < symbol.size(); ++id) token_bytes[id] = gpt2_symbol_bytes(symbol[id]);
  bpe_ = std::make_unique<ByteLevelBpe>(std::move(token_bytes), "tokenizer file " + vocab_name);

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
    for (const std::string& part : {left, right, left + right}) {
      if (!id_of.count(part)) throw std::runtime_error(where() + ": \"" + part + "\" is not in " + vocab_name);
    }
    bpe_->add_merge(gpt2_symbol_bytes(left), gpt2_symbol_bytes(right), rank++, where());
  }
}

std::vector<int32_t> Gpt2BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  thread_local std::vector<std::string_view> pieces;
  pieces.clear();
  pretokenize(PretokenizerPattern::gpt2, text, pieces);
  for (std::string_view piece : pieces) bpe_->encode_piece(piece, false, ids);
  return ids;
}

std::string Gpt2BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  for (int32_t id : ids) bpe_->decode(id, text);
  return text;
}

}  // namespace linea::data
