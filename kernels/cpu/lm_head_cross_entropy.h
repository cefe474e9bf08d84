// LM head + cross-entropy, fused over blocks of rows so that at most rows_per_block × V logits
// exist at once. For each block of rows of x ([N, D]) against the head W ([V, D]):
//   logits = x_blk · Wᵀ                                        (GEMM)
//   lse_n = m_n + log Σ_v exp(logits_nv − m_n),  m_n = max_v logits_nv   (stable)
//   loss_n = lse_n − logits_n[target_n]            (0, and no gradient, when target_n = −1)
//   dlogits_nv = loss_scale · (exp(logits_nv − lse_n) − [v = target_n])   (in place of logits)
//   dx_blk = dlogits · W (overwritten),   dW += dlogitsᵀ · x_blk          (GEMMs)
// lm_head_cross_entropy returns Σ_n loss_n, summed in row order; dx and/or dweight may be null to
// skip them.
//
// The vocabulary-parallel form (ops.h) splits this over ranks that each hold rows
// [vocab_begin, vocab_begin + V) of W: lm_head_shard_statistics gives each row's lse over the shard
// and its target logit when the target is in the shard; lm_head_combine_statistics turns the R
// ranks' statistics ([R, 2, N], rank order) into the lse over the whole vocabulary and the loss
// sum; lm_head_shard_backward recomputes the shard's logits and applies the gradient rule above
// with that lse.
#pragma once
#include <cstdint>

namespace linea::cpu {

// The block height the ops use: as many rows as keep one block's logits under ~4M elements.
int64_t lm_head_rows_per_block(int64_t vocab);

template <class T>
double lm_head_cross_entropy(const T* x, const T* weight, const int32_t* targets, int64_t n, int64_t d, int64_t v,
                             T loss_scale, T* dx, T* dweight, int64_t rows_per_block);

// lse, target_logit: [N]
template <class T>
void lm_head_shard_statistics(const T* x, const T* weight, const int32_t* targets, int64_t n, int64_t d, int64_t v,
                              int64_t vocab_begin, T* lse, T* target_logit, int64_t rows_per_block);

// stats: [ranks, 2, N] (lse rows, then target-logit rows, per rank); lse: [N]
template <class T>
double lm_head_combine_statistics(const T* stats, const int32_t* targets, int64_t n, int64_t ranks, T* lse);

template <class T>
void lm_head_shard_backward(const T* x, const T* weight, const int32_t* targets, int64_t n, int64_t d, int64_t v,
                            int64_t vocab_begin, const T* lse, T loss_scale, T* dx, T* dweight, int64_t rows_per_block);

}  // namespace linea::cpu
