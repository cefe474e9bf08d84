// Tokenizer: text ↔ token ids, one interface over SentencePiece (sentencepiece_tokenizer.h), GPT-2
// byte-level BPE (gpt2_bpe_tokenizer.h), tiktoken rank files (tiktoken_tokenizer.h) and Hugging
// Face tokenizer.json BPE (hf_tokenizer.h). encode() treats its input as plain text: special tokens
// written in the text are not recognised (as tiktoken's encode_ordinary, which llm.c uses).
// Implementations are immutable after loading, so encode/decode may run on many threads at once.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace linea::data {

// Which tokenizer and where its files are. kind "sentencepiece": path is a .model file;
// "gpt2-bpe": a directory holding vocab.json and merges.txt; "hf-tokenizer-json": a tokenizer.json;
// "tiktoken-cl100k", "tiktoken-o200k", "tiktoken-llama3": a .tiktoken rank file.
struct TokenizerSpec {
  std::string kind;
  std::string path;
};
bool is_known_tokenizer_kind(std::string_view kind);
std::string known_tokenizer_kinds();  // for error messages

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Throws std::out_of_range for an id outside [0, vocab_size()).
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  virtual int32_t vocab_size() const = 0;
  // The id written before every document in shards.
  virtual int32_t eos_id() const = 0;
  virtual std::string_view kind() const = 0;
};

// Loads the tokenizer a spec names; `base` resolves a relative path (a manifest's directory).
// Throws std::runtime_error naming the file when it is missing or malformed.
std::unique_ptr<Tokenizer> load_tokenizer(const TokenizerSpec& spec, const std::filesystem::path& base = {});

}  // namespace linea::data
