// The delta-rule family by chunks of kDeltaRuleChunk = 64 tokens (reference/mixers.md §2): the
// WY/UT-transform algorithm that the CUDA kernels implement, written as a readable CPU reference.
// Per (sequence, head) and chunk of L ≤ 64 tokens (the last chunk of a sequence may be partial),
// with S0 the state entering the chunk, G_t = Σ_{s≤t} g_s the log decay cumulated from the chunk
// start (per channel: G ∈ R^{L×K}), γ = exp(G):
//
//   A_ij  = Σ_d b_id k_id k_jd exp(G_id − G_jd)   (j < i)     T = (I + A)^{-1}
//   U     = T (w ⊙ V),   W = T (b ⊙ K ⊙ γ),      Ũ = U − W S0  (the written vectors u_t)
//   P_ij  = Σ_d q_id k_jd exp(G_id − G_jd)        (j ≤ i)
//   O     = scale · [(Q ⊙ γ) S0 + P Ũ]
//   S_end = Diag(γ_L) S0 + (K ⊙ exp(G_L − G))ᵀ Ũ
//
// Only exp(G_i − G_j) with i ≥ j, exp(G_t) and exp(G_L − G_t) are formed, so with g ≤ 0 no
// positive number is exponentiated. The backward recomputes the chunk states with a forward pass,
// then walks the chunks in reverse, recomputing each chunk's A, P, T, U, W, Ũ. Results match
// delta_rule_recurrent.h; arguments and layouts are the same. OpenMP over (sequence, head); the
// products inside a chunk are matmuls through OpenBLAS, A and P by sub-chunks of 16 (the pairs of
// two sub-chunks as one matmul, reference/mixers.md §2.3: kernels/chunk/cpu/decayed_gram.h, whose
// log decays are cumulated in f64), the state step kernels/chunk/cpu/chunk_state.h.
// r, d_r: the write error and its gradient as in delta_rule_recurrent.h, by chunks
// (reference/mixers.md §5.1): R = τ − (ρ ⊙ γ) S0 − gram(ρ, k, j < i) Ũ, that is Ũ itself for
// erase_write.
#pragma once
#include "kernels/seq_layout.h"
#include "model/mixers/delta_rule/cpu/delta_rule_operands.h"

namespace linea::cpu {

inline constexpr int64_t kDeltaRuleChunk = 64;

template <class T>
void delta_rule_chunked_forward(const DeltaRuleOperands<T>& in, const SeqLayout& seqs, T* o, T* ht, T* r = nullptr);

template <class T>
void delta_rule_chunked_backward(const DeltaRuleOperands<T>& in, const SeqLayout& seqs, const T* d_o, const T* dht,
                                 const T* d_r, const DeltaRuleGradients<T>& grads);

}  // namespace linea::cpu
