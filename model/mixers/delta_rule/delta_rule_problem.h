// One delta-rule mixer's forward/backward problem read from an HDF5 file in
// flash-linear-attention's layout (q, k [B,T,H,K], v [B,T,H,V], beta [B,T,H] or b/w, g, h0,
// cu_seqlens, do, dht; see `linea mixer --help`) and flattened to the op's layout
// (model/mixers/delta_rule/delta_rule.h); and the family's `linea mixer` format, which runs it.
// Every dataset is checked before anything is read: a missing, misshapen, wrongly typed or
// out-of-place dataset throws std::invalid_argument naming the file, the dataset and what was
// expected. Datasets with other names are ignored.
#pragma once
#include <cstdint>
#include <filesystem>

#include "kernels/seq_layout.h"
#include "kernels/tensor.h"
#include "model/mixer_problem.h"
#include "model/mixers/delta_rule/delta_rule.h"
#include "model/mixers/delta_rule/delta_rule_config.h"

namespace linea {

struct DeltaRuleFileProblem {
  int64_t batch = 0, seq_len = 0, heads = 0, key_dim = 0, value_dim = 0;  // B, T, H, K, V
  bool packed = false;      // cu_seqlens given: B = 1 and the T tokens hold seqs.num_seqs() sequences
  SeqLayout seqs;           // B sequences of T tokens, or cu_seqlens
  ops::DeltaRuleSpec spec;  // the preset's decay and gate kinds, fla's default scale 1/sqrt(K)
  ops::DeltaRuleInputs in;  // [N = B·T, H, ·] tensors; h0 undefined when absent
  Tensor d_o;               // [N, H, V] (zeros when `do` is absent)
  Tensor dht;               // [S, H, K, V], undefined when absent

  int64_t num_tokens() const { return batch * seq_len; }
  int64_t num_states() const { return seqs.num_seqs(); }  // S: one state per sequence
};

// Reads `path` for `preset`; floating tensors are converted to `compute` (f32 or f64).
DeltaRuleFileProblem read_delta_rule_problem(const std::filesystem::path& path, const DeltaRulePreset& preset,
                                             DType compute);

// `linea mixer` for deltanet, gdn, kda and gdn2.
const MixerProblemFormat& delta_rule_problem_format();

}  // namespace linea
