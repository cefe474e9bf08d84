// How the CPU kernels of the gated-linear-attention family see their operands (the math is in
// model/mixers/gla/gla.h). Per-token operands are Rows views of [N, H, C] buffers, as for the delta
// rule (kernels/chunk/cpu/blocks.h): a scalar decay [N, H] is a view that broadcasts over the
// K channels, a fixed per-head decay [H] one that broadcasts over tokens as well. Gradients are
// accumulated through the same views (a broadcasting view sums its gradient). A key tied to the
// decay (k = 1 − exp(g)) has no buffer: key() computes it, and its gradient goes into dg.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/chunk/cpu/blocks.h"
#include "model/mixers/gla/gla.h"

namespace linea::cpu {

template <class T>
struct GlaOperands {
  int64_t heads = 0, key_dim = 0, value_dim = 0;
  ops::GlaSpec spec;
  T scale = 1;
  Rows<const T> q, k, v, log_decay;  // k undefined when tied to the decay
  const T* u = nullptr;              // [H, K], the bonus readout only
  const T* h0 = nullptr;             // [S, H, K, V] or null (zeros)

  bool tied_key() const { return spec.key == ops::GlaKey::one_minus_decay; }
  bool bonus() const { return spec.readout == ops::GlaReadout::before_write_bonus; }
  // k_td, given or 1 − exp(g_td) (as −expm1, exact for small |g|).
  T key(int64_t t, int64_t h, int64_t d) const {
    return tied_key() ? -std::expm1(log_decay.at(t, h, d)) : k.at(t, h, d);
  }
};

// Gradients, accumulated (+=). dk is undefined when the key is tied (dg takes its part), dlog_decay
// for a fixed decay. du ([S, H, K], one row per (sequence, head): see sum_bonus_parts) and dh0 may be
// null.
template <class T>
struct GlaGradients {
  Rows<T> dq, dk, dv, dlog_decay;
  T* du_parts = nullptr;
  T* dh0 = nullptr;
};

// u is shared by the sequences of a head, so each (sequence, head) task adds its part of du into its
// own row of du_parts ([S, H, K]); du[h] = Σ_s du_parts[s, h] is then summed in sequence order, so
// that no two threads write one entry and the sum does not depend on the number of threads.
template <class T>
void sum_bonus_parts(const std::vector<T>& du_parts, int64_t seqs, int64_t heads, int64_t key_dim, T* du) {
  for (int64_t s = 0; s < seqs; ++s) {
    for (int64_t i = 0; i < heads * key_dim; ++i) du[i] += du_parts[static_cast<size_t>(s * heads * key_dim + i)];
  }
}

}  // namespace linea::cpu
