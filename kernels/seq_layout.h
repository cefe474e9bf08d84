// SeqLayout: how N flat tokens split into independent sequences (documents), as fla's cu_seqlens.
// Sequence s covers tokens [cu_seqlens[s], cu_seqlens[s+1]). Recurrent state, short convolutions
// and attention never cross a boundary; RoPE positions restart at 0 in every sequence.
#pragma once
#include <cstdint>
#include <vector>

namespace linea {

struct SeqLayout {
  std::vector<int64_t> cu_seqlens{0};

  // `batch` sequences of `seq_len` tokens each.
  static SeqLayout uniform(int64_t batch, int64_t seq_len);
  int64_t num_tokens() const { return cu_seqlens.back(); }
  int64_t num_seqs() const { return static_cast<int64_t>(cu_seqlens.size()) - 1; }
  int64_t begin(int64_t s) const { return cu_seqlens[s]; }
  int64_t end(int64_t s) const { return cu_seqlens[s + 1]; }
  // Position of every token inside its sequence.
  std::vector<int32_t> positions() const;
  // Throws std::invalid_argument unless offsets start at 0, never decrease and end at n_tokens.
  void validate(int64_t n_tokens) const;
};

}  // namespace linea
