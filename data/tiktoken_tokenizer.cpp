#include "data/tiktoken_tokenizer.h"

#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "data/atomic_file.h"

namespace linea::data {

namespace {

// Standard base64 (RFC 4648, '=' padding); false on anything else.
bool base64_decode(std::string_view in, std::string& out) {
  out.clear();
  if (in.empty() || in.size() % 4 != 0) return false;
  const auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  for (size_t i = 0; i < in.size(); i += 4) {
    const bool last = i + 4 == in.size();
    const int pad = last ? (in[i + 3] == '=') + (in[i + 2] == '=') : 0;
    if (pad == 1 && in[i + 2] == '=') return false;  // "x=y=" is not padding
    uint32_t bits = 0;
    for (int k = 0; k < 4 - pad; ++k) {
      const int v = value(in[i + k]);
      if (v < 0) return false;
      bits |= static_cast<uint32_t>(v) << (18 - 6 * k);
    }
    out.push_back(static_cast<char>(bits >> 16));
    if (pad < 2) out.push_back(static_cast<char>((bits >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(bits & 0xFF));
  }
  return true;
}

struct Variant {
  PretokenizerPattern pattern;
  int32_t real_ranks;  // the rank count of the encoding's own file
  int32_t specials;    // ids after the ranks
  int32_t eos_offset;  // the document separator, from n
  std::vector<std::pair<int32_t, const char*>> names;
};

const Variant& variant_info(PretokenizerPattern p) {
  static const Variant cl100k{PretokenizerPattern::cl100k,
                              100256,
                              21,
                              1,
                              {{1, "<|endoftext|>"},
                               {2, "<|fim_prefix|>"},
                               {3, "<|fim_middle|>"},
                               {4, "<|fim_suffix|>"},
                               {20, "<|endofprompt|>"}}};
  static const Variant o200k{
      PretokenizerPattern::o200k, 199998, 21, 1, {{1, "<|endoftext|>"}, {20, "<|endofprompt|>"}}};
  static const Variant llama3{PretokenizerPattern::llama3,
                              128000,
                              256,
                              0,
                              {{0, "<|begin_of_text|>"},
                               {1, "<|end_of_text|>"},
                               {6, "<|start_header_id|>"},
                               {7, "<|end_header_id|>"},
                               {9, "<|eot_id|>"}}};
  switch (p) {
    case PretokenizerPattern::o200k: return o200k;
    case PretokenizerPattern::llama3: return llama3;
    default: return cl100k;
  }
}

constexpr PretokenizerPattern kVariants[] = {PretokenizerPattern::cl100k, PretokenizerPattern::o200k,
                                             PretokenizerPattern::llama3};

}  // namespace

std::string TiktokenTokenizer::kind_for(PretokenizerPattern variant) {
  return "tiktoken-" + std::string(pattern_name(variant));
}

std::optional<PretokenizerPattern> TiktokenTokenizer::variant_of_kind(std::string_view kind) {
  for (PretokenizerPattern v : kVariants) {
    if (kind == kind_for(v)) return v;
  }
  return std::nullopt;
}

TiktokenTokenizer::TiktokenTokenizer(const std::filesystem::path& file, std::optional<PretokenizerPattern> variant) {
  const std::string name = "tokenizer file " + file.string();
  std::istringstream lines(read_file(file));
  std::vector<std::string> token_bytes;
  std::vector<bool> seen;
  std::string line, bytes;
  for (int64_t line_no = 1; std::getline(lines, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const auto where = [&] { return name + " line " + std::to_string(line_no); };
    const size_t space = line.find(' ');
    size_t used = 0;
    long long rank = -1;
    try {
      if (space != std::string::npos) rank = std::stoll(line.substr(space + 1), &used);
    } catch (const std::exception&) {
      rank = -1;
    }
    if (space == std::string::npos || used == 0 || space + 1 + used != line.size() || rank < 0 || rank >= INT32_MAX ||
        !base64_decode(std::string_view(line).substr(0, space), bytes)) {
      throw std::runtime_error(where() + ": expected \"BASE64 RANK\", got \"" + line.substr(0, 80) + "\"");
    }
    const auto r = static_cast<size_t>(rank);
    if (r >= token_bytes.size()) {
      token_bytes.resize(r + 1);
      seen.resize(r + 1, false);
    }
    if (seen[r]) throw std::runtime_error(where() + ": rank " + std::to_string(r) + " appears twice");
    seen[r] = true;
    token_bytes[r] = bytes;
  }
  ranks_ = static_cast<int32_t>(token_bytes.size());
  for (size_t r = 0; r < seen.size(); ++r) {
    if (!seen[r]) {
      throw std::runtime_error(name + ": rank " + std::to_string(r) + " is missing (expected ranks 0.." +
                               std::to_string(ranks_ - 1) + ", each once)");
    }
  }
  if (!variant) {
    for (PretokenizerPattern v : kVariants) {
      if (variant_info(v).real_ranks == ranks_) variant = v;
    }
    if (!variant) {
      throw std::invalid_argument(name + " has " + std::to_string(ranks_) +
                                  " ranks, none of cl100k_base, o200k_base or LLaMA-3's: name the regex and special "
                                  "tokens, tiktoken:PATH:cl100k, :o200k or :llama3");
    }
  }
  variant_ = *variant;
  kind_ = kind_for(variant_);
  const Variant& v = variant_info(variant_);
  vocab_size_ = ranks_ + v.specials;
  eos_id_ = ranks_ + v.eos_offset;
  for (const auto& [offset, special] : v.names) special_[ranks_ + offset] = special;
  token_bytes.resize(static_cast<size_t>(vocab_size_));  // special ids: no bytes
  bpe_ = std::make_unique<ByteLevelBpe>(std::move(token_bytes), name);
  bpe_->add_merges_from_ranks();
}

std::vector<int32_t> TiktokenTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  thread_local std::vector<std::string_view> pieces;
  pieces.clear();
  pretokenize(variant_, text, pieces);
  for (std::string_view piece : pieces) bpe_->encode_piece(piece, true, ids);
  return ids;
}

std::string TiktokenTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  for (int32_t id : ids) {
    if (id >= ranks_ && id < vocab_size_) {
      const auto it = special_.find(id);
      if (it != special_.end()) text += it->second;
      continue;
    }
    bpe_->decode(id, text);
  }
  return text;
}

}  // namespace linea::data
