// TiktokenTokenizer: tiktoken's byte-level BPE from a .tiktoken rank file (one "BASE64 RANK" line
// per token; ranks are 0..n-1, each once, and every single byte is a token), with the regex and
// special tokens of one of three encodings (n = the number of ranks):
//   cl100k  regex cl100k; <|endoftext|> n+1, <|fim_prefix|> n+2, <|fim_middle|> n+3,
//           <|fim_suffix|> n+4, <|endofprompt|> n+20; vocabulary n+21 (cl100k_base.tiktoken:
//           n = 100256, so <|endoftext|> = 100257 and 100277 ids, as tiktoken says)
//   o200k   regex o200k; <|endoftext|> n+1, <|endofprompt|> n+20; vocabulary n+21 (o200k_base:
//           n = 199998, <|endoftext|> = 199999, 200019 ids)
//   llama3  regex llama3; 256 special tokens from n, among them <|begin_of_text|> n,
//           <|end_of_text|> n+1, <|start_header_id|> n+6, <|end_header_id|> n+7, <|eot_id|> n+9
//           (Meta's tokenizer.model: n = 128000, 128256 ids)
// Without a variant the rank count picks it for those three files; another file needs one.
// encode() is tiktoken's encode_ordinary: pretokenize() with the regex, then each piece is one
// token when it is one, else BPE-merged by rank (ByteLevelBpe). The id written before each document
// is <|endoftext|> (cl100k, o200k) or <|begin_of_text|> (llama3: llm.c's LLaMA-3 shards begin every
// document with it). decode() gives the special tokens above by name; other reserved ids decode to
// nothing.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "data/byte_level_bpe.h"
#include "data/pretokenizer.h"
#include "data/tokenizer.h"

namespace linea::data {

class TiktokenTokenizer : public Tokenizer {
 public:
  // "tiktoken-cl100k", "tiktoken-o200k", "tiktoken-llama3".
  static std::string kind_for(PretokenizerPattern variant);
  static std::optional<PretokenizerPattern> variant_of_kind(std::string_view kind);

  // Throws std::runtime_error naming the file and line on a malformed rank file, and
  // std::invalid_argument when no variant is given and the rank count does not pick one.
  TiktokenTokenizer(const std::filesystem::path& file, std::optional<PretokenizerPattern> variant);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  int32_t eos_id() const override { return eos_id_; }
  std::string_view kind() const override { return kind_; }

 private:
  PretokenizerPattern variant_ = PretokenizerPattern::cl100k;
  std::string kind_;
  std::unique_ptr<ByteLevelBpe> bpe_;
  int32_t ranks_ = 0, vocab_size_ = 0, eos_id_ = -1;
  std::map<int32_t, std::string> special_;  // id → name
};

}  // namespace linea::data
