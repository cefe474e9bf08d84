// The delta-rule family token by token: the readable reference that the chunked algorithm is
// checked against. Per (sequence, head), with S ∈ R^{K×V} starting at h0 (or 0):
//
//   S' = Diag(a_t) S_{t−1},  a_t = exp(g_t)        (a_t = 1 without decay)
//   u_t = w_t ⊙ v_t − S'ᵀ (b_t ⊙ k_t)              (erase read at the gated key)
//   S_t = S' + k_t u_tᵀ,     o_t = scale · S_tᵀ q_t
//
// The backward runs through time in reverse. It keeps the state at the start of every segment of
// kRecurrentSegment tokens and recomputes the per-token states of one segment at a time, so its
// memory per (sequence, head) is O((T / kRecurrentSegment + kRecurrentSegment)·K·V).
// Layouts as model/mixers/delta_rule/delta_rule.h: o, d_o: [N, H, V]; ht, dht: [S, H, K, V] (null = skip / zeros).
// Gradients are accumulated into `grads`. OpenMP over (sequence, head).
// r (null = skip): the write error of every token [N, H, V] (delta_rule_operands.h); d_r (null =
// zeros): ∂L/∂r, whose gradient the backward adds to the inputs'.
#pragma once
#include "kernels/seq_layout.h"
#include "model/mixers/delta_rule/cpu/delta_rule_operands.h"

namespace linea::cpu {

inline constexpr int64_t kRecurrentSegment = 64;

template <class T>
void delta_rule_recurrent_forward(const DeltaRuleOperands<T>& in, const SeqLayout& seqs, T* o, T* ht, T* r = nullptr);

template <class T>
void delta_rule_recurrent_backward(const DeltaRuleOperands<T>& in, const SeqLayout& seqs, const T* d_o, const T* dht,
                                   const T* d_r, const DeltaRuleGradients<T>& grads);

}  // namespace linea::cpu
