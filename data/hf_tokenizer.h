// HfTokenizer: a Hugging Face tokenizer.json whose model is BPE, in one of two families:
//   byte-level (GPT-2, LLaMA-3): a ByteLevel pre-tokenizer (its GPT-2 regex when
//     use_regex, add_prefix_space), alone or after Split pre-tokenizers whose regex is one of
//     pretokenizer.h's patterns (behavior "Isolated"); vocabulary symbols in GPT-2's byte alphabet;
//     model.ignore_merges: a piece that is a token is that token.
//   SentencePiece-style (LLaMA-2, Mistral): "▁" for spaces from a Prepend + Replace normalizer or a
//     Metaspace pre-tokenizer (replacement, prepend_scheme always / first / never, split); symbols
//     are characters, byte_fallback turns a character outside the vocabulary into its <0xNN> byte
//     tokens, else unk_token (fuse_unk: one per run).
// Pieces are merged by the merge list's ranks (BytePairMerges; merges as "a b" strings or [a, b]
// pairs). encode() treats special and added tokens written in the text as plain text (tokenizers'
// encode_special_tokens = True) and adds no template tokens. The id written before each document:
// the special token the post-processor's TemplateProcessing puts first (LLaMA's <s>,
// <|begin_of_text|>: what tokenizer(text) starts with), else the first of <|endoftext|>,
// <|end_of_text|>, </s>, <eos> among the added tokens. Anything else the file asks for (other
// models, normalizers, pre-tokenizers, regexes, BPE dropout, subword prefixes) is refused with an
// error naming the file and the JSON field.
#pragma once
#include <array>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/byte_level_bpe.h"
#include "data/byte_pair_merges.h"
#include "data/pretokenizer.h"
#include "data/tokenizer.h"

namespace linea::data {

class HfTokenizer : public Tokenizer {
 public:
  static constexpr const char* kKind = "hf-tokenizer-json";
  explicit HfTokenizer(const std::filesystem::path& file);
  ~HfTokenizer() override;

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  int32_t eos_id() const override { return eos_id_; }
  std::string_view kind() const override { return kKind; }
  bool byte_level() const { return static_cast<bool>(byte_level_); }

 private:
  // One pre-tokenization step, applied to every piece the steps before it made.
  struct Step {
    enum class Kind : uint8_t { split, byte_level, metaspace };
    Kind kind = Kind::split;
    PretokenizerPattern pattern = PretokenizerPattern::gpt2;  // split; byte_level with use_regex
    bool use_regex = false;                                   // byte_level
    bool prefix_space = false;                                // byte_level: add_prefix_space
    std::string replacement;                                  // metaspace
    enum class Prepend : uint8_t { always, first, never } prepend = Prepend::always;
    bool split = false;  // metaspace
  };
  struct Replace {
    std::string from, to;  // from empty: prepend `to`
  };
  std::string normalize(std::string_view text) const;
  void pieces(std::string_view text, std::vector<std::string_view>& out, std::deque<std::string>& storage) const;
  void encode_characters(std::string_view piece, std::vector<int32_t>& out) const;

  std::vector<Replace> normalizer_;
  std::vector<Step> steps_;
  bool ignore_merges_ = false;
  // byte-level
  std::unique_ptr<ByteLevelBpe> byte_level_;
  // SentencePiece-style
  std::unordered_map<std::string, int32_t> id_of_;
  std::vector<std::string> token_;  // id → symbol
  BytePairMerges merges_;
  std::array<int32_t, 256> byte_token_{};      // <0xNN>, −1 when absent
  std::unordered_map<int32_t, char> byte_of_;  // the inverse
  bool byte_fallback_ = false, fuse_unk_ = false;
  int32_t unk_id_ = -1;
  std::string space_symbol_;  // "▁" when the file maps spaces to it (decode turns it back)
  bool strip_leading_space_ = false;

  std::unordered_map<int32_t, std::string> added_;  // id → content of added tokens
  int32_t vocab_size_ = 0, eos_id_ = -1;
};

}  // namespace linea::data
