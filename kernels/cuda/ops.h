// The CUDA implementations of the ops in kernels/ops.h, called by them after their argument checks
// when the tensors are on a CUDA device: same arguments, same math, same conventions (parameter
// gradients accumulated, input gradients overwritten). Tensors are f32 or bf16 (one dtype per
// call, rstd f32); all arithmetic accumulates in f32. Everything runs on the default stream, in
// order; parameter-gradient sums are deterministic (no atomics). Each kernel file states its math.
#pragma once
#include <cstdint>

#include "kernels/ops.h"

namespace linea::cuda {

void add_inplace(Tensor y, const Tensor& x);
// out = in (accumulate: out += in), f32 and bf16 in any combination.
void convert(Tensor out, const Tensor& in, bool accumulate);

// The table holds rows [vocab_begin, vocab_begin + V) of the vocabulary (0 for the whole table;
// embedding_shard_* of ops.h otherwise).
void embedding_forward(Tensor out, const Tensor& table, const Tensor& ids, int64_t vocab_begin);
void embedding_backward(Tensor dtable, const Tensor& dout, const Tensor& ids, int64_t vocab_begin);

// rmsnorm_* is gated_rmsnorm_* with one head and no gate.
void gated_rmsnorm_forward(Tensor out, Tensor rstd, const Tensor& o, const Tensor& z, const Tensor& weight,
                           int64_t heads, ops::GateActivation act, double eps);
void gated_rmsnorm_backward(Tensor d_o, Tensor dz, Tensor dweight, const Tensor& dout, const Tensor& o, const Tensor& z,
                            const Tensor& weight, const Tensor& rstd, int64_t heads, ops::GateActivation act);

void linear_forward(Tensor out, const Tensor& x, const Tensor& weight, const Tensor& bias);
void linear_backward(Tensor dx, Tensor dweight, Tensor dbias, const Tensor& dout, const Tensor& x, const Tensor& weight,
                     bool accumulate_dx);

void swiglu_forward(Tensor out, const Tensor& gate, const Tensor& up);
void swiglu_backward(Tensor dgate, Tensor dup, const Tensor& dout, const Tensor& gate, const Tensor& up);

void rope_apply(Tensor x, const Tensor& positions, int64_t heads, double base, bool inverse);

void l2norm_forward(Tensor out, Tensor rstd, const Tensor& x, int64_t heads, double eps);
void l2norm_backward(Tensor dx, const Tensor& dout, const Tensor& out, const Tensor& rstd, int64_t heads);

void short_conv_silu_forward(Tensor out, const Tensor& x, const Tensor& weight, const SeqLayout& seqs);
void short_conv_silu_backward(Tensor dx, Tensor dweight, const Tensor& dout, const Tensor& x, const Tensor& weight,
                              const SeqLayout& seqs);

void sigmoid_gate_forward(Tensor beta, const Tensor& logits, double scale);
void sigmoid_gate_backward(Tensor dlogits, const Tensor& dbeta, const Tensor& beta, double scale);

// The log forget gate (kernels/ops.h); the backward without the lower bound's gradient.
void log_forget_gate_forward(Tensor g, const Tensor& logits, const Tensor& lower_bound, double normalizer);
void log_forget_gate_backward(Tensor dlogits, const Tensor& dg, const Tensor& logits, const Tensor& lower_bound,
                              double normalizer);

void decay_gate_forward(Tensor g, const Tensor& a, const Tensor& A_log, const Tensor& dt_bias);
void decay_gate_backward(Tensor da, Tensor dA_log, Tensor ddt_bias, const Tensor& dg, const Tensor& a,
                         const Tensor& A_log, const Tensor& dt_bias);

// How lm_head_cross_entropy tiles the logits: blocks of `rows` rows × `vocab` vocabulary entries
// (at most rows × vocab f32 logits exist at once); lm_head_default_tiling is what ops:: uses.
struct LmHeadTiling {
  int64_t rows = 0, vocab = 0;
};
LmHeadTiling lm_head_default_tiling(int64_t n, int64_t v);
double lm_head_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& targets, double loss_scale, Tensor dx,
                             Tensor dweight, LmHeadTiling tiling);
// The vocabulary-parallel steps of ops.h over the same tiles; stats, gathered_stats and lse are f32.
void lm_head_shard_statistics(Tensor stats, const Tensor& x, const Tensor& weight, const Tensor& targets,
                              int64_t vocab_begin, LmHeadTiling tiling);
double lm_head_combine_statistics(Tensor lse, const Tensor& gathered_stats, const Tensor& targets);
void lm_head_shard_backward(Tensor dx, Tensor dweight, const Tensor& x, const Tensor& weight, const Tensor& targets,
                            int64_t vocab_begin, const Tensor& lse, double loss_scale, LmHeadTiling tiling);

}  // namespace linea::cuda
