#include "data/tokenizer.h"

#include <stdexcept>

#include "data/gpt2_bpe_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tiktoken_tokenizer.h"

namespace linea::data {

bool is_known_tokenizer_kind(std::string_view kind) {
  return kind == SentencePieceTokenizer::kKind || kind == Gpt2BpeTokenizer::kKind || kind == HfTokenizer::kKind ||
         TiktokenTokenizer::variant_of_kind(kind).has_value();
}

std::string known_tokenizer_kinds() {
  return std::string("\"") + SentencePieceTokenizer::kKind + "\", \"" + Gpt2BpeTokenizer::kKind + "\", \"" +
         HfTokenizer::kKind + "\", \"tiktoken-cl100k\", \"tiktoken-o200k\" or \"tiktoken-llama3\"";
}

std::unique_ptr<Tokenizer> load_tokenizer(const TokenizerSpec& spec, const std::filesystem::path& base) {
  const std::filesystem::path path = base.empty() ? std::filesystem::path(spec.path) : base / spec.path;
  if (spec.kind == SentencePieceTokenizer::kKind) return std::make_unique<SentencePieceTokenizer>(path);
  if (spec.kind == Gpt2BpeTokenizer::kKind) return std::make_unique<Gpt2BpeTokenizer>(path);
  if (spec.kind == HfTokenizer::kKind) return std::make_unique<HfTokenizer>(path);
  if (const auto variant = TiktokenTokenizer::variant_of_kind(spec.kind)) {
    return std::make_unique<TiktokenTokenizer>(path, variant);
  }
  throw std::invalid_argument("unknown tokenizer kind \"" + spec.kind + "\": expected " + known_tokenizer_kinds());
}

}  // namespace linea::data
