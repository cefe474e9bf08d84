// MixerProblem: one delta-rule mixer's forward/backward inputs, read from an HDF5 file in
// flash-linear-attention's layout (q, k [B,T,H,K], v [B,T,H,V], beta [B,T,H] or b/w, g, h0,
// cu_seqlens, do, dht; see `linea mixer --help`) and flattened to model/mixers/delta_rule/delta_rule.h's layout.
// Every dataset is checked before anything is read: a missing, misshapen, wrongly typed or
// out-of-place dataset throws std::invalid_argument naming the file, the dataset and what was
// expected. Datasets with other names are ignored.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "kernels/seq_layout.h"
#include "kernels/tensor.h"
#include "model/mixers/delta_rule/delta_rule.h"

namespace linea::cli {

enum class DeltaMixer { deltanet, gdn, kda, gdn2 };

// "deltanet", "gdn", "kda" or "gdn2"; throws std::invalid_argument otherwise.
DeltaMixer parse_delta_mixer(std::string_view name);
std::string_view delta_mixer_name(DeltaMixer mixer);
// The op's decay and gate kinds for `mixer`, with fla's default scale 1/sqrt(K).
ops::DeltaRuleSpec delta_mixer_spec(DeltaMixer mixer, int64_t key_dim);

struct MixerProblem {
  int64_t batch = 0, seq_len = 0, heads = 0, key_dim = 0, value_dim = 0;  // B, T, H, K, V
  bool packed = false;      // cu_seqlens given: B = 1 and the T tokens hold seqs.num_seqs() sequences
  SeqLayout seqs;           // B sequences of T tokens, or cu_seqlens
  ops::DeltaRuleInputs in;  // [N = B·T, H, ·] tensors; h0 undefined when absent
  Tensor d_o;               // [N, H, V] (zeros when `do` is absent)
  Tensor dht;               // [S, H, K, V], undefined when absent

  int64_t num_tokens() const { return batch * seq_len; }
  int64_t num_states() const { return seqs.num_seqs(); }  // S: one state per sequence
};

// Reads `path` for `mixer`; floating tensors are converted to `compute` (f32 or f64).
MixerProblem read_mixer_problem(const std::filesystem::path& path, DeltaMixer mixer, DType compute);

}  // namespace linea::cli
