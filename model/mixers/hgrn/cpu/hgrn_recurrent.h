// HGRN's recurrence token by token: the readable reference that the chunked scan is checked
// against. Per sequence and channel, h starts at h0 (or 0):
//
//   forward   h_t = a_t h_{t−1} + x_t,  o_t = h_t,  a_t = exp(g_t)
//   backward  δ_t = ∂L/∂h_t = do_t + a_{t+1} δ_{t+1}  (δ after the last token: dht)
//             dx_t = δ_t,  dg_t = δ_t a_t h_{t−1},  dh0 = a_first δ_first
//
// The backward recomputes the states with the forward pass. Layouts as model/mixers/hgrn/hgrn.h;
// o, d_o: [N, D]; ht, dht: [S, D] (null = skip / zeros). OpenMP over sequences.
#pragma once
#include "kernels/seq_layout.h"
#include "model/mixers/hgrn/cpu/hgrn_operands.h"

namespace linea::cpu {

template <class T>
void hgrn_recurrent_forward(const HgrnOperands<T>& in, const SeqLayout& seqs, T* o, T* ht);

template <class T>
void hgrn_recurrent_backward(const HgrnOperands<T>& in, const SeqLayout& seqs, const T* d_o, const T* dht,
                             const HgrnGradients<T>& grads);

}  // namespace linea::cpu
