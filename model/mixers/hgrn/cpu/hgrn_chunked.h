// HGRN's recurrence by chunks of kHgrnChunk = 64 tokens: the parallel-scan form the GPU runs, as a
// CPU reference. A linear scan z_s = exp(l_s) z_{s−1} + y_s over a sequence, entered with z = z_in,
// is computed in three passes:
//
//   1. every chunk on its own (in parallel): L_s = Σ_{r≤s} l_r from the chunk start, and the local
//      scan w_s = exp(l_s) w_{s−1} + y_s entered with 0;
//   2. the carries, chunk after chunk: c_0 = z_in, c_{n+1} = exp(L_last(n)) c_n + w_last(n);
//   3. every token (in parallel): z_s = exp(L_s) c_n + w_s.
//
// The forward is the scan of (l, y) = (g, x) entered with h0. The backward is the same scan run
// from the end of the sequence: δ_t = ∂L/∂h_t = do_t + a_{t+1} δ_{t+1}, entered with dht; then
// dx_t = δ_t, dg_t = δ_t a_t h_{t−1} and dh0 = a_first δ_first, with the states h recomputed by the
// forward scan. Only exp of sums of log decays (≤ 0) is formed. Results match hgrn_recurrent.h.
#pragma once
#include "kernels/seq_layout.h"
#include "model/mixers/hgrn/cpu/hgrn_operands.h"

namespace linea::cpu {

inline constexpr int64_t kHgrnChunk = 64;

template <class T>
void hgrn_chunked_forward(const HgrnOperands<T>& in, const SeqLayout& seqs, T* o, T* ht);

template <class T>
void hgrn_chunked_backward(const HgrnOperands<T>& in, const SeqLayout& seqs, const T* d_o, const T* dht,
                           const HgrnGradients<T>& grads);

}  // namespace linea::cpu
