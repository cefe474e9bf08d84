// How the CPU delta-rule kernels see their operands (the math is in model/mixers/delta_rule/delta_rule.h).
//
// Every per-token operand is a Rows view (kernels/chunk/cpu/blocks.h): this is how β becomes the
// erase gate b = β·1 and the write gate w = β·1, and how a scalar decay becomes a per-channel one;
// gradients accumulate through the same views (dβ = Σ_d db_d + Σ_e dw_e, dg = Σ_d dg_d).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/chunk/cpu/blocks.h"
#include "kernels/seq_layout.h"
#include "model/mixers/delta_rule/delta_rule.h"

namespace linea::cpu {

// The inputs of one call in the general (GDN-2) form: erase gate b ∈ R^K, write gate w ∈ R^V and
// per-channel log decay g ∈ R^K per token and head (log_decay undefined for DecayKind::none).
template <class T>
struct DeltaRuleOperands {
  int64_t heads = 0, key_dim = 0, value_dim = 0;
  ops::DecayKind decay = ops::DecayKind::none;  // chooses the chunked kernel's Gram path (per-channel or not)
  ops::GateKind gate = ops::GateKind::beta;     // what the write error r reads and aims at (below)
  T scale = 1;
  Rows<const T> q, k, v, erase, write, log_decay;
  const T* h0 = nullptr;  // [S, H, K, V] or null (zeros)
};

// The write error of a token (reference/mixers.md §5.1), r = τ − S'ᵀρ with S' the decayed
// previous state: GateKind::beta reads with ρ = k and aims at τ = v (so u = β r); erase_write reads
// with ρ = b ⊙ k and aims at τ = w ⊙ v (so r = u, the written vector). Never formed by dividing by β.

// Gradients, accumulated (+=). dh0 may be null. dlog_decay is undefined for DecayKind::none.
template <class T>
struct DeltaRuleGradients {
  Rows<T> dq, dk, dv, derase, dwrite, dlog_decay;
  T* dh0 = nullptr;
};

}  // namespace linea::cpu
