// TokenBatch: what the loaders hand to a training or eval step. `batch_seqs` rows of `seq_len`
// input tokens, flattened row-major, the next token of each as its target, and the documents in
// them as a SeqLayout over the flat batch_seqs × seq_len tokens: every row starts a sequence, and
// a sequence also starts at every input token equal to EOS (EOS precedes each document), so no
// document attends to or carries state from another (eos_id −1: rows are whole sequences).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "data/dataset.h"
#include "kernels/seq_layout.h"

namespace linea::data {

struct TokenBatch {
  int64_t batch_seqs = 0, seq_len = 0;
  std::vector<int32_t> inputs;   // [batch_seqs × seq_len]
  std::vector<int32_t> targets;  // [batch_seqs × seq_len]: targets[i] is the token after inputs[i]
  SeqLayout layout;
};

// Fills `batch` from windows of seq_len + 1 tokens of `stream` starting at `window_starts`.
void pack_windows(const TokenStream& stream, std::span<const int64_t> window_starts, int64_t seq_len, int32_t eos_id,
                  TokenBatch& batch);
// The same over tokens in memory.
void pack_windows(std::span<const int32_t> tokens, std::span<const int64_t> window_starts, int64_t seq_len,
                  int32_t eos_id, TokenBatch& batch);

}  // namespace linea::data
