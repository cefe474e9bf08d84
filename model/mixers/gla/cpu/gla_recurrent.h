// The gated-linear-attention family token by token: the readable reference that the chunked
// algorithm is checked against. Per (sequence, head), with S ∈ R^{K×V} starting at h0 (or 0) and
// a_t = exp(g_t):
//
//   S_t = Diag(a_t) S_{t−1} + k_t v_tᵀ
//   o_t = scale · S_tᵀ q_t                                    (after_write)
//   o_t = scale · (S_{t−1}ᵀ q_t + (q_t · (u ⊙ k_t)) v_t)       (before_write_bonus)
//
// The backward runs through time in reverse. It keeps the state at the start of every segment of
// kGlaRecurrentSegment tokens and recomputes the per-token states of one segment at a time, so its
// memory per (sequence, head) is O((T / kGlaRecurrentSegment + kGlaRecurrentSegment)·K·V).
// Layouts as model/mixers/gla/gla.h: o, d_o: [N, H, V]; ht, dht: [S, H, K, V] (null = skip / zeros).
// Gradients are accumulated into `grads`. OpenMP over (sequence, head).
#pragma once
#include "kernels/seq_layout.h"
#include "model/mixers/gla/cpu/gla_operands.h"

namespace linea::cpu {

inline constexpr int64_t kGlaRecurrentSegment = 64;

template <class T>
void gla_recurrent_forward(const GlaOperands<T>& in, const SeqLayout& seqs, T* o, T* ht);

template <class T>
void gla_recurrent_backward(const GlaOperands<T>& in, const SeqLayout& seqs, const T* d_o, const T* dht,
                            const GlaGradients<T>& grads);

}  // namespace linea::cpu
