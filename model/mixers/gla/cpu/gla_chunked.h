// The gated-linear-attention family by chunks of kGlaChunk = 64 tokens: the algorithm that the CUDA
// kernels implement, as a readable CPU reference. Per (sequence, head) and chunk of L ≤ 64 tokens
// (the last chunk of a sequence may be partial), with S0 the state entering the chunk, G_t the log
// decay cumulated from the chunk start, γ = exp(G), and the readout's log decay R_t = G_t (it reads
// S_t) or R_t = G_{t−1} (the bonus readout reads S_{t−1}; R_0 = 0):
//
//   P_ij  = Σ_d q_id k_jd exp(R_id − G_jd)   (j ≤ t for R = G, j < t for the bonus readout)
//           + [i = j] Σ_d q_id u_d k_id       (the bonus readout)
//   O     = scale · [(Q ⊙ exp(R)) S0 + P V]
//   S_end = Diag(γ_L) S0 + (K ⊙ exp(G_L − G))ᵀ V
//
// P is kernels/chunk/cpu/decayed_gram.h's sub-chunked Gram (no positive number is exponentiated).
// The backward recomputes the chunk states with a forward pass, then walks the chunks in reverse.
// Results match gla_recurrent.h; arguments and layouts are the same. OpenMP over (sequence, head).
#pragma once
#include "kernels/seq_layout.h"
#include "model/mixers/gla/cpu/gla_operands.h"

namespace linea::cpu {

inline constexpr int64_t kGlaChunk = 64;

template <class T>
void gla_chunked_forward(const GlaOperands<T>& in, const SeqLayout& seqs, T* o, T* ht);

template <class T>
void gla_chunked_backward(const GlaOperands<T>& in, const SeqLayout& seqs, const T* d_o, const T* dht,
                          const GlaGradients<T>& grads);

}  // namespace linea::cpu
