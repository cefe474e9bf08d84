// SentencePiece models through libsentencepiece: load a .model file, or train one on in-memory
// sentences. Models trained here are lossless: identity normalization (no NFKC, whitespace kept
// as is) and byte fallback (characters outside the vocabulary become <0xNN> byte pieces), so
// decode(encode(text)) == text for any UTF-8 text. The EOS id is the model's </s> piece.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace linea::data {

class SentencePieceTokenizer : public Tokenizer {
 public:
  static constexpr const char* kKind = "sentencepiece";
  // Throws std::runtime_error naming the file when it cannot be read or is not a model with </s>.
  explicit SentencePieceTokenizer(const std::filesystem::path& model_file);
  // From the bytes of a serialized model; `source` names them in errors.
  SentencePieceTokenizer(const std::string& serialized_model, const std::string& source);
  ~SentencePieceTokenizer() override;

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int32_t vocab_size() const override;
  int32_t eos_id() const override;
  std::string_view kind() const override { return kKind; }
  // The model's bytes, as a .model file holds them.
  std::string serialized_model() const;

 private:
  void check_loaded(const std::string& source) const;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

struct SentencePieceTrainOptions {
  int vocab_size = 4096;  // an upper bound: a small corpus may give fewer pieces
  int threads = 1;
  std::string model_type = "unigram";  // or "bpe"
  double character_coverage = 0.9995;
  uint32_t seed = 1;
};

// Trains a model on `sentences` (each at most 4192 bytes is used; longer ones are cut) and returns
// its serialized bytes. Throws std::runtime_error with SentencePiece's message on failure.
std::string train_sentencepiece(const std::vector<std::string>& sentences, const SentencePieceTrainOptions& options);

}  // namespace linea::data
