// The CUDA entry points of the ops in kernels/ops.h. Each op's contract (shapes, math, gradient
// conventions) is stated once, there; ops:: checks the arguments and calls the entry point of the
// same name when the tensors are on a CUDA device. What holds for all of them: tensors are f32 or
// bf16 (one dtype per call; rstd and the LM head's statistics f32), arithmetic accumulates in f32,
// everything runs on the default stream, in order, and parameter-gradient sums are deterministic
// (no atomics). Each kernel file states its math. Where an entry point differs from its op (an
// extra argument, one kernel serving two ops), the difference is stated beside it; ops of ops.h
// not listed here have no CUDA kernel yet (ops:: refuses CUDA tensors for them).
#pragma once
#include <cstdint>

#include "kernels/ops.h"

namespace linea::cuda {

void add_inplace(Tensor y, const Tensor& x);
// Serves ops::convert (accumulate = false) and ops::add_converted (true); f32 and bf16 in any combination.
void convert(Tensor out, const Tensor& in, bool accumulate);

// Serves embedding_* (vocab_begin = 0) and embedding_shard_* (ops:: has checked the ids' range).
void embedding_forward(Tensor out, const Tensor& table, const Tensor& ids, int64_t vocab_begin);
void embedding_backward(Tensor dtable, const Tensor& dout, const Tensor& ids, int64_t vocab_begin);

// Serves gated_rmsnorm_* and rmsnorm_* (one head, act = none, z undefined).
// residual and sum (defined for rmsnorm_forward_residual only): sum = o + residual is written and normed.
void gated_rmsnorm_forward(Tensor out, Tensor rstd, const Tensor& o, const Tensor& z, const Tensor& weight,
                           int64_t heads, ops::GateActivation act, double eps, const Tensor& residual = Tensor(),
                           Tensor sum = Tensor());
// Also serves gated_rmsnorm_backward_recompute. residual (defined for rmsnorm_backward_residual
// only): added to d_o in the same pass; may alias d_o. recompute_out (defined for
// gated_rmsnorm_backward_recompute only; rstd undefined then): rstd recomputed with eps, and the
// forward's y written there (aliasing no input: groups read twice write it before reading dout).
void gated_rmsnorm_backward(Tensor d_o, Tensor dz, Tensor dweight, const Tensor& dout, const Tensor& o, const Tensor& z,
                            const Tensor& weight, const Tensor& rstd, int64_t heads, ops::GateActivation act,
                            const Tensor& residual = Tensor(), Tensor recompute_out = Tensor(), double eps = 0);

void linear_forward(Tensor out, const Tensor& x, const Tensor& weight, const Tensor& bias);
void linear_backward(Tensor dx, Tensor dweight, Tensor dbias, const Tensor& dout, const Tensor& x, const Tensor& weight,
                     bool accumulate_dx);

void swiglu_forward(Tensor out, const Tensor& gate, const Tensor& up);
// out: undefined for swiglu_backward, defined for swiglu_backward_with_product.
void swiglu_backward(Tensor dgate, Tensor dup, const Tensor& dout, const Tensor& gate, const Tensor& up,
                     Tensor out = Tensor());

void rope_apply(Tensor x, const Tensor& positions, int64_t heads, double base, bool inverse);

void l2norm_forward(Tensor out, Tensor rstd, const Tensor& x, int64_t heads, double eps);
void l2norm_backward(Tensor dx, const Tensor& dout, const Tensor& out, const Tensor& rstd, int64_t heads);

// bias and dbias undefined without a conv bias; kernel widths up to kShortConvMaxWidth (ops:: checks it).
inline constexpr int kShortConvMaxWidth = 16;
void short_conv_silu_forward(Tensor out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                             const SeqLayout& seqs);
void short_conv_silu_backward(Tensor dx, Tensor dweight, Tensor dbias, const Tensor& dout, const Tensor& x,
                              const Tensor& weight, const Tensor& bias, const SeqLayout& seqs);

void sigmoid_gate_forward(Tensor beta, const Tensor& logits, double scale);
void sigmoid_gate_backward(Tensor dlogits, const Tensor& dbeta, const Tensor& beta, double scale);

void log_forget_gate_forward(Tensor g, const Tensor& logits, const Tensor& lower_bound, double normalizer);
void log_forget_gate_backward(Tensor dlogits, Tensor dlower_bound, const Tensor& dg, const Tensor& logits,
                              const Tensor& lower_bound, double normalizer);
void forget_input_forward(Tensor out, const Tensor& i, const Tensor& g);
void forget_input_backward(Tensor di, Tensor dg, const Tensor& dout, const Tensor& i, const Tensor& g);
void exp_decay_forward(Tensor g, const Tensor& w);
void exp_decay_backward(Tensor dw, const Tensor& dg, const Tensor& g);
void ssd_gate_forward(Tensor g, Tensor delta, const Tensor& dt, const Tensor& A_log, const Tensor& dt_bias);
void ssd_gate_backward(Tensor ddt, Tensor dA_log, Tensor ddt_bias, const Tensor& dg, const Tensor& ddelta,
                       const Tensor& dt, const Tensor& A_log, const Tensor& dt_bias);
void layer_lower_bound_forward(Tensor lower_bound, const Tensor& gamma, int64_t layer);
void layer_lower_bound_backward(Tensor dgamma, const Tensor& dlower_bound, const Tensor& gamma, int64_t layer);

void activation_forward(Tensor out, const Tensor& x, ops::Activation act);
void activation_backward(Tensor dx, const Tensor& dout, const Tensor& saved, ops::Activation act);

void token_shift_forward(Tensor delta, const Tensor& x, const SeqLayout& seqs);
void token_shift_backward(Tensor dx, const Tensor& ddelta, const SeqLayout& seqs);
void lerp_forward(Tensor out, const Tensor& x, const Tensor& delta, const Tensor& mu);
void lerp_backward(Tensor ddelta, Tensor dmu, const Tensor& dout, const Tensor& delta, const Tensor& mu);

// ops:: has checked the pairs; any element type (rows are copied as bytes).
void copy_rows(Tensor out, const Tensor& in, const Tensor& rows);

void group_norm_forward(Tensor out, Tensor mean, Tensor rstd, const Tensor& x, const Tensor& weight, const Tensor& bias,
                        int64_t groups, double eps);
void group_norm_backward(Tensor dx, Tensor dweight, Tensor dbias, const Tensor& dout, const Tensor& x,
                         const Tensor& weight, const Tensor& mean, const Tensor& rstd, int64_t groups);

void repeat_heads(Tensor out, const Tensor& x, int64_t heads);
void sum_heads(Tensor dx, const Tensor& dout, int64_t heads);
void scale_heads_forward(Tensor out, const Tensor& x, const Tensor& s);
void scale_heads_backward(Tensor dx, Tensor ds, const Tensor& dout, const Tensor& x, const Tensor& s);
void add_scaled_heads_forward(Tensor y, const Tensor& x, const Tensor& D);
void add_scaled_heads_backward(Tensor dx, Tensor dD, const Tensor& dy, const Tensor& x, const Tensor& D);

void decay_gate_forward(Tensor g, const Tensor& a, const Tensor& A_log, const Tensor& dt_bias);
void decay_gate_backward(Tensor da, Tensor dA_log, Tensor ddt_bias, const Tensor& dg, const Tensor& a,
                         const Tensor& A_log, const Tensor& dt_bias);

// The LM head's entry points take the tiling of the logits: blocks of `rows` rows × `vocab`
// vocabulary entries (at most rows × vocab f32 logits exist at once); ops:: passes
// lm_head_default_tiling, tests pass smaller tiles.
struct LmHeadTiling {
  int64_t rows = 0, vocab = 0;
};
LmHeadTiling lm_head_default_tiling(int64_t n, int64_t v);
double lm_head_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& targets, double loss_scale, Tensor dx,
                             Tensor dweight, LmHeadTiling tiling);
void lm_head_shard_statistics(Tensor stats, const Tensor& x, const Tensor& weight, const Tensor& targets,
                              int64_t vocab_begin, LmHeadTiling tiling);
double lm_head_combine_statistics(Tensor lse, const Tensor& gathered_stats, const Tensor& targets);
void lm_head_shard_backward(Tensor dx, Tensor dweight, const Tensor& x, const Tensor& weight, const Tensor& targets,
                            int64_t vocab_begin, const Tensor& lse, double loss_scale, LmHeadTiling tiling);

}  // namespace linea::cuda
