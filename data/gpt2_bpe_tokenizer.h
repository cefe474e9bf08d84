// GPT-2 byte-level BPE, loaded from a directory holding vocab.json (token string → id) and
// merges.txt (one merge "a b" per line in priority order, an optional "#version" first line).
// encode(): pretokenize() the text with GPT-2's pattern; merge each piece's bytes by merges.txt's
// ranks (ByteLevelBpe: vocabulary symbols are bytes mapped to the printable code points of
// gpt2_byte_to_unicode()); emit the vocab ids of what remains.
// The EOS id is that of "<|endoftext|>". Loading checks that the vocabulary holds every byte
// symbol, ids are 0..n-1 each once, and every merge's parts and result are in the vocabulary.
#pragma once
#include <array>
#include <filesystem>
#include <memory>
#include <string>

#include "data/byte_level_bpe.h"
#include "data/tokenizer.h"

namespace linea::data {

// GPT-2's bytes_to_unicode(): bytes that are printable Latin-1 map to themselves; the other 68 map,
// in byte order, to U+0100, U+0101, ... (so ' ' → 'Ġ' U+0120, '\n' → 'Ċ' U+010A).
const std::array<uint32_t, 256>& gpt2_byte_to_unicode();
// A vocabulary symbol in that alphabet as the bytes it stands for (code points outside it are kept
// as their UTF-8).
std::string gpt2_symbol_bytes(std::string_view symbol);

class Gpt2BpeTokenizer : public Tokenizer {
 public:
  static constexpr const char* kKind = "gpt2-bpe";
  static constexpr const char* kEndOfText = "<|endoftext|>";
  // `dir` holds vocab.json and merges.txt. Throws std::runtime_error naming the file and line.
  explicit Gpt2BpeTokenizer(const std::filesystem::path& dir);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return bpe_->vocab_size(); }
  int32_t eos_id() const override { return eos_id_; }
  std::string_view kind() const override { return kKind; }

 private:
  std::unique_ptr<ByteLevelBpe> bpe_;
  int32_t eos_id_ = -1;
};

}  // namespace linea::data
