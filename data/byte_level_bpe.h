// ByteLevelBpe: the vocabulary and merges of a byte-level BPE (GPT-2's merges.txt, tiktoken ranks,
// a Hugging Face ByteLevel tokenizer.json) and the encoding of one pre-tokenized piece: its bytes
// start as the 256 single-byte tokens and are merged by BytePairMerges. With whole_piece_lookup, a
// piece that is itself a token is that token without merging (tiktoken always does this; Hugging
// Face when the model says "ignore_merges"). Tokens are kept as their raw bytes; `decode` appends
// them. Immutable once built, so encode_piece may run on many threads at once. Each thread keeps the
// ids of the short pieces it has encoded (at most 65536 pieces of up to 32 bytes; a text's frequent
// words), cleared when it encodes with another ByteLevelBpe.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/byte_pair_merges.h"

namespace linea::data {

class ByteLevelBpe {
 public:
  // `token_bytes[id]` is what token id decodes to (empty for ids without bytes, e.g. gaps or
  // special tokens decoded elsewhere). `source` names the file in errors. Throws
  // std::runtime_error when a single byte has no token.
  ByteLevelBpe(std::vector<std::string> token_bytes, const std::string& source);

  // The id of the token whose bytes are `bytes`; −1 when there is none.
  int32_t id_of(std::string_view bytes) const;
  // Adds the merge of tokens `left` + `right` with `rank`; throws std::runtime_error naming
  // `where` when either part or the concatenation is not a token.
  void add_merge(std::string_view left, std::string_view right, int32_t rank, const std::string& where);
  // Every split of every token of ≥ 2 bytes into two tokens, ranked by the token's rank (its id):
  // the merges a tiktoken rank file implies.
  void add_merges_from_ranks();

  void encode_piece(std::string_view piece, bool whole_piece_lookup, std::vector<int32_t>& out) const;
  // Appends the bytes of `id`; throws std::out_of_range for an id outside the vocabulary.
  void decode(int32_t id, std::string& out) const;
  int32_t vocab_size() const { return static_cast<int32_t>(token_bytes_.size()); }
  size_t num_merges() const { return merges_.size(); }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> token_bytes_;
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> id_of_;  // looked up by string_view
  std::array<int32_t, 256> byte_id_{};
  BytePairMerges merges_;
  uint64_t serial_;  // tells this vocabulary's cache entries from another's (addresses are reused)
};

}  // namespace linea::data
