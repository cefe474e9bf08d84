// GPT-2 byte-level BPE, loaded from a directory holding vocab.json (token string → id) and
// merges.txt (one merge "a b" per line in priority order, an optional "#version" first line).
// encode(): gpt2_pretokenize() the text; map each piece's bytes to the printable code points of
// gpt2_byte_to_unicode(); then repeatedly merge, everywhere in the piece, the adjacent pair with
// the lowest merge rank until no pair is in merges.txt; emit the vocab ids of what remains.
// The EOS id is that of "<|endoftext|>". Loading checks that the vocabulary holds every byte
// symbol, ids are 0..n-1 each once, and every merge's parts and result are in the vocabulary.
#pragma once
#include <array>
#include <filesystem>
#include <string>
#include <unordered_map>

#include "data/tokenizer.h"

namespace linea::data {

// GPT-2's bytes_to_unicode(): bytes that are printable Latin-1 map to themselves; the other 68 map,
// in byte order, to U+0100, U+0101, ... (so ' ' → 'Ġ' U+0120, '\n' → 'Ċ' U+010A).
const std::array<uint32_t, 256>& gpt2_byte_to_unicode();

class Gpt2BpeTokenizer : public Tokenizer {
 public:
  static constexpr const char* kKind = "gpt2-bpe";
  static constexpr const char* kEndOfText = "<|endoftext|>";
  // `dir` holds vocab.json and merges.txt. Throws std::runtime_error naming the file and line.
  explicit Gpt2BpeTokenizer(const std::filesystem::path& dir);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(token_bytes_.size()); }
  int32_t eos_id() const override { return eos_id_; }
  std::string_view kind() const override { return kKind; }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged;
  };
  static uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  std::array<int32_t, 256> byte_id_{};          // id of each single-byte symbol
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) → rank and merged id
  std::vector<std::string> token_bytes_;        // id → the bytes it decodes to
  int32_t eos_id_ = -1;
};

}  // namespace linea::data
