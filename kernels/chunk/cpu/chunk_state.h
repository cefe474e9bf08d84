// The state carried from one chunk to the next (reference/mixers.md §2.2), shared by the chunked
// CPU kernels: with S0 the state entering a chunk of L tokens, K its keys, U the rows it writes
// (the delta rule's Ũ, the GLA family's V) and its decay (kernels/chunk/cpu/decayed_gram.h),
//
//   S_end = Diag(γ_L) S0 + (K ⊙ exp(G_L − G))ᵀ U
//
// and the backward of that line, given dS = ∂L/∂S_end:
//   dU += (K ⊙ exp(G_L − G)) dS,   dK += (U dSᵀ) ⊙ exp(G_L − G),   dS0 += Diag(γ_L) dS,
//   dG_t −= (U dSᵀ ⊙ K ⊙ exp(G_L − G))_t  and the same sum added at G_L (for t < L: at t = L the two
//   cancel exactly and are skipped, so that no rounding residue of them reaches dg),
//   dG_L += γ_L ⊙ Σ_e S0 ⊙ dS.
#pragma once
#include <cstdint>

#include "kernels/chunk/cpu/block_products.h"
#include "kernels/chunk/cpu/blocks.h"
#include "kernels/chunk/cpu/decayed_gram.h"

namespace linea::cpu {

template <class T, bool kPerChannel>
void advance_chunk_state(Block<T>& S, const Block<T>& K, const ChunkDecay<T, kPerChannel>& decay, const Block<T>& U) {
  const T* gamma_end = decay.gamma.row(K.rows() - 1);
  for (int64_t d = 0; d < S.rows(); ++d) {
    T* s = S.row(d);
    for (int64_t e = 0; e < S.cols(); ++e) s[e] *= gamma_end[d];
  }
  add_atb(S, hadamard(K, decay.to_end), U);
}

template <class T, bool kPerChannel>
void advance_chunk_state_backward(const Block<T>& dS, const Block<T>& S0, const Block<T>& K,
                                  const ChunkDecay<T, kPerChannel>& decay, const Block<T>& U, Block<T>& dU,
                                  Block<T>& dK, Block<T>& dG, Block<T>& dS0) {
  const int64_t L = K.rows(), D = K.cols(), V = U.cols();
  const Block<T> k_to_end = hadamard(K, decay.to_end);  // K ⊙ exp(G_L − G)
  Block<T> dk_to_end(L, D);
  add_ab(dU, k_to_end, dS);
  add_abt(dk_to_end, U, dS);
  add_hadamard(dK, dk_to_end, decay.to_end);
  T* dG_end = dG.row(L - 1);
  for (int64_t t = 0; t + 1 < L; ++t) {
    for (int64_t d = 0; d < D; ++d) {
      const T through_to_end = dk_to_end(t, d) * k_to_end(t, d);
      dG(t, d) -= through_to_end;
      dG_end[d] += through_to_end;
    }
  }
  for (int64_t d = 0; d < D; ++d) {
    const T g_end = decay.gamma(L - 1, d);
    T state_dot = 0;
    for (int64_t e = 0; e < V; ++e) {
      state_dot += S0(d, e) * dS(d, e);
      dS0(d, e) += g_end * dS(d, e);
    }
    dG_end[d] += g_end * state_dot;
  }
}

}  // namespace linea::cpu
