// ops: the dispatching interface of every numeric kernel.
//
// Each op takes Tensors, checks their shapes and element types (std::invalid_argument naming the
// op and the argument), and dispatches on device and dtype: on the CPU to the readable reference
// in kernels/cpu/ (f32 for training, f64 for finite-difference tests), on CUDA to the entry points
// of kernels/cuda/ops.h (f32 or bf16, f32 arithmetic; the rstd outputs stay f32 in bf16 calls; an
// op without one there refuses CUDA tensors).
// Rows are tokens: an activation is [N, D] with N = number of flat tokens (B·T, packed).
//
// Gradient convention: gradients of parameters are ACCUMULATED (+=) so that micro-batches add up;
// gradients of inputs are OVERWRITTEN unless the argument says otherwise.
#pragma once
#include <cstdint>

#include "kernels/seq_layout.h"
#include "kernels/tensor.h"

namespace linea::ops {

// ---- elementwise -----------------------------------------------------------------------------
// y += x (same shape and dtype)
void add_inplace(Tensor y, const Tensor& x);
// Element type conversion: out = in, rounded to out's dtype (bf16: round-to-nearest-even).
// out and in: same shape and device, each f32, f64 or bf16 (f32 or bf16 on CUDA), dtypes may differ.
void convert(Tensor out, const Tensor& in);
// y += x with x of another dtype (e.g. bf16 micro-batch gradients into f32 ones): the sum is formed
// in the wider arithmetic (f64 on the CPU, f32 on CUDA) and rounded once to y's dtype.
void add_converted(Tensor y, const Tensor& x);

// ---- embedding: out[n, :] = table[ids[n], :] ---------------------------------------------------
// ids: i32 [N] (each in [0, V)), table: [V, D], out: [N, D]
void embedding_forward(Tensor out, const Tensor& table, const Tensor& ids);
// dtable[ids[n], :] += dout[n, :]
void embedding_backward(Tensor dtable, const Tensor& dout, const Tensor& ids);
// Vocabulary-parallel form: the table holds rows [vocab_begin, vocab_begin + V) of the full table
// of `vocab` rows. ids: i32 [N], each in [0, vocab). out[n, :] = table[ids[n] − vocab_begin, :] when
// ids[n] is in the shard, else 0 (summing out over the shards gives embedding_forward's result);
// the backward adds only the rows of the ids in the shard.
void embedding_shard_forward(Tensor out, const Tensor& table, const Tensor& ids, int64_t vocab_begin, int64_t vocab);
void embedding_shard_backward(Tensor dtable, const Tensor& dout, const Tensor& ids, int64_t vocab_begin, int64_t vocab);

// ---- RMSNorm over the last dimension: y = x · rstd · w, rstd = 1/sqrt(mean(x²) + eps) ---------
// x, out: [N, D]; weight: [D]; rstd: [N] (saved for backward)
void rmsnorm_forward(Tensor out, Tensor rstd, const Tensor& x, const Tensor& weight, double eps);
// The residual stream's add and the norm after it in one pass: sum = x + residual, then
// out = rmsnorm(sum) with its rstd. sum: [N, D], may alias x or residual (h += x in place).
// On the CPU the same bits as add_inplace then rmsnorm_forward.
void rmsnorm_forward_residual(Tensor out, Tensor rstd, Tensor sum, const Tensor& x, const Tensor& residual,
                              const Tensor& weight, double eps);
// dx overwritten; dweight accumulated
void rmsnorm_backward(Tensor dx, Tensor dweight, const Tensor& dout, const Tensor& x, const Tensor& weight,
                      const Tensor& rstd);
// The same with the residual stream's gradient added in the same pass (fused y += x after it):
// dx = rmsnorm_backward's dx + residual; residual: [N, D], may alias dx (dx += norm's gradient).
// On the CPU the same bits as rmsnorm_backward followed by add_inplace(dx, residual).
void rmsnorm_backward_residual(Tensor dx, Tensor dweight, const Tensor& dout, const Tensor& x, const Tensor& weight,
                               const Tensor& rstd, const Tensor& residual);

// ---- linear: out = x · Wᵀ + b (through BLAS on the CPU) ----------------------------------------
// x: [N, I], weight: [O, I], bias: [O] or undefined, out: [N, O]
void linear_forward(Tensor out, const Tensor& x, const Tensor& weight, const Tensor& bias);
// dx = dout · W (added to dx when accumulate_dx); dweight += doutᵀ · x; dbias += Σ_n dout.
// dx, dweight or dbias may be undefined to skip that gradient.
void linear_backward(Tensor dx, Tensor dweight, Tensor dbias, const Tensor& dout, const Tensor& x, const Tensor& weight,
                     bool accumulate_dx);

// ---- SwiGLU: out = silu(gate) ⊙ up, silu(a) = a·σ(a) -------------------------------------------
// gate, up, out: [N, F]
void swiglu_forward(Tensor out, const Tensor& gate, const Tensor& up);
void swiglu_backward(Tensor dgate, Tensor dup, const Tensor& dout, const Tensor& gate, const Tensor& up);
// swiglu_backward that also writes the forward's product, out = silu(gate) ⊙ up (what W_down's
// weight gradient reads), in the same pass instead of a swiglu_forward before it. dgate, dup and
// out: [N, F], overwritten; each may alias dout, gate or up (an element's inputs are read before
// its outputs are written). On the CPU the same bits as swiglu_forward and swiglu_backward.
void swiglu_backward_with_product(Tensor dgate, Tensor dup, Tensor out, const Tensor& dout, const Tensor& gate,
                                  const Tensor& up);

// ---- RoPE (rotate-half convention, as Llama/fla): in place on x: [N, H·Dh], Dh even ---------
// For pair i < Dh/2 at position p: θ = p · base^(−2i/Dh);
// (x_i, x_{i+Dh/2}) ← (x_i cosθ − x_{i+Dh/2} sinθ, x_i sinθ + x_{i+Dh/2} cosθ).
// positions: i32 [N], any value (θ is linear in p: a negative position rotates the other way; no
// range to check, so a CUDA call never waits for the device). The backward is the rotation by −θ,
// i.e. rope_apply(..., inverse=true).
void rope_apply(Tensor x, const Tensor& positions, int64_t heads, double base, bool inverse);

// ---- L2 norm per head: y = x / sqrt(Σ x² + eps) over each head's Dh channels -------------------
// x, out: [N, H·Dh]; rstd: [N, H]
void l2norm_forward(Tensor out, Tensor rstd, const Tensor& x, int64_t heads, double eps);
void l2norm_backward(Tensor dx, const Tensor& dout, const Tensor& out, const Tensor& rstd, int64_t heads);

// ---- short causal depthwise conv (kernel W = weight.dim(1), optional bias) + SiLU ----------------
// pre[t, c] = Σ_{i<W} weight[c, i] · x[t − (W−1) + i, c] (+ bias[c]), x taken as 0 before the start
// of t's sequence in `seqs`; out = silu(pre). x, out: [N, C]; weight: [C, W]; bias: [C] or
// undefined (no bias: fla's ShortConvolution; Mamba-2's conv has one).
void short_conv_silu_forward(Tensor out, const Tensor& x, const Tensor& weight, const SeqLayout& seqs,
                             const Tensor& bias = Tensor());
// dx overwritten, dweight and dbias accumulated (pre is recomputed); dbias with bias only.
void short_conv_silu_backward(Tensor dx, Tensor dweight, const Tensor& dout, const Tensor& x, const Tensor& weight,
                              const SeqLayout& seqs, const Tensor& bias = Tensor(), Tensor dbias = Tensor());

// ---- gates -------------------------------------------------------------------------------------
// β = scale · σ(logits) (scale 2 when negative eigenvalues are allowed). logits, beta: same shape.
void sigmoid_gate_forward(Tensor beta, const Tensor& logits, double scale);
void sigmoid_gate_backward(Tensor dlogits, const Tensor& dbeta, const Tensor& beta, double scale);
// Mamba-style log decay: g[n, h·c + j] = −exp(A_log[h]) · softplus(a[n, h·c + j] + dt_bias[h·c + j])
// a, g: [N, H·c] (c = 1: one decay per head, GDN; c = d_k: per channel, KDA/GDN-2);
// A_log: [H]; dt_bias: [H·c]. da overwritten; dA_log and ddt_bias accumulated.
void decay_gate_forward(Tensor g, const Tensor& a, const Tensor& A_log, const Tensor& dt_bias);
void decay_gate_backward(Tensor da, Tensor dA_log, Tensor ddt_bias, const Tensor& dg, const Tensor& a,
                         const Tensor& A_log, const Tensor& dt_bias);

// ---- gated output RMSNorm per head: y = o · rstd · γ ⊙ act(z) ----------------------------------
// rstd = 1/sqrt(mean_over_Dv(o²) + eps); γ: [Dv] shared by heads; o, z, out: [N, H·Dv]; rstd: [N, H].
// act: silu, sigmoid, or none (then z is ignored and may be undefined: plain per-head RMSNorm).
enum class GateActivation { none, silu, sigmoid };
void gated_rmsnorm_forward(Tensor out, Tensor rstd, const Tensor& o, const Tensor& z, const Tensor& weight,
                           int64_t heads, GateActivation act, double eps);
// do, dz overwritten (dz skipped when act == none); dweight accumulated
void gated_rmsnorm_backward(Tensor d_o, Tensor dz, Tensor dweight, const Tensor& dout, const Tensor& o, const Tensor& z,
                            const Tensor& weight, const Tensor& rstd, int64_t heads, GateActivation act);
// The backward with the forward recomputed in the same pass, for a caller that keeps neither: rstd
// from o (and eps), and out = the forward's y (what an output projection's weight gradient reads)
// written beside d_o and dz. out: [N, H·Dv], aliases no input (on the GPU, groups too wide to
// stay in registers get y from a forward pass that runs before dout is read). On the CPU the same
// bits as gated_rmsnorm_forward then gated_rmsnorm_backward.
void gated_rmsnorm_backward_recompute(Tensor d_o, Tensor dz, Tensor dweight, Tensor out, const Tensor& dout,
                                      const Tensor& o, const Tensor& z, const Tensor& weight, int64_t heads,
                                      GateActivation act, double eps);

// ---- LM head + cross-entropy, fused, over blocks of rows (never all logits at once) -------------
// logits = x · Wᵀ ([N, V]); loss_n = logsumexp(logits_n) − logits_n[target_n]; target −1 = ignored.
// Returns Σ_n loss_n over non-ignored rows. When dx/dweight are defined, also writes
// dx = loss_scale · dlogits · W (overwritten) and dweight += loss_scale · dlogitsᵀ · x,
// with dlogits = softmax − onehot(target), so that loss_scale = 1/count gives the mean's gradient.
// x: [N, D], weight: [V, D], targets: i32 [N].
double lm_head_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& targets, double loss_scale, Tensor dx,
                             Tensor dweight);

// Vocabulary-parallel form, in three steps, for R ranks where rank r holds rows
// [vocab_begin_r, vocab_begin_r + V_r) of the head (targets are ids of the full vocabulary):
// 1. lm_head_shard_statistics, on each rank, over the logits of its shard (logits = x · W_rᵀ):
//      stats[0, n] = log Σ_j exp(logits_nj),
//      stats[1, n] = logits_n[target_n − vocab_begin] when target_n is in the shard, else 0
//    (both 0 on ignored rows). stats: [2, N].
// 2. lm_head_combine_statistics, on the R ranks' stats gathered in rank order ([R, 2, N]):
//      lse_n = log Σ_r exp(stats[r, 0, n])  (the log-sum-exp over the whole vocabulary; 0 on ignored rows)
//    returns Σ_n (lse_n − Σ_r stats[r, 1, n]) over non-ignored rows = lm_head_cross_entropy's loss.
// 3. lm_head_shard_backward, on each rank, with that lse ([N]):
//      dlogits_nj = loss_scale · (exp(logits_nj − lse_n) − [j = target_n − vocab_begin])  (0 on ignored rows)
//      dx = dlogits · W_r (overwritten: this shard's term of the sum over ranks), dweight += dlogitsᵀ · x.
// x: [N, D], weight: [V_r, D], targets: i32 [N] (≥ −1). stats, gathered_stats and lse are
// statistics: x's dtype, except f32 in bf16 calls (so always f32 on CUDA).
void lm_head_shard_statistics(Tensor stats, const Tensor& x, const Tensor& weight, const Tensor& targets,
                              int64_t vocab_begin);
double lm_head_combine_statistics(Tensor lse, const Tensor& gathered_stats, const Tensor& targets);
void lm_head_shard_backward(Tensor dx, Tensor dweight, const Tensor& x, const Tensor& weight, const Tensor& targets,
                            int64_t vocab_begin, const Tensor& lse, double loss_scale);

// ---- gates of the gated-linear-attention family and HGRN (reference/mixers.md §1.5–1.10) --------
// Log forget gate: g = log(lb + (1 − lb) · σ(x)) / normalizer, per channel c of x: [N, C], with the
// lower bound lb: [C] in [0, 1) (HGRN's, HGRN-2's) or undefined (0: g = logsigmoid(x) / normalizer,
// GLA's with normalizer 16). Computed in log space, stable for any finite x.
void log_forget_gate_forward(Tensor g, const Tensor& logits, const Tensor& lower_bound, double normalizer);
// dlogits overwritten; dlower_bound accumulated (undefined to skip; only with a lower bound).
void log_forget_gate_backward(Tensor dlogits, Tensor dlower_bound, const Tensor& dg, const Tensor& logits,
                              const Tensor& lower_bound, double normalizer);
// HGRN's input: out = silu(i) ⊙ (1 − exp(g)), i, g, out of one shape. di, dg overwritten.
void forget_input_forward(Tensor out, const Tensor& i, const Tensor& g);
void forget_input_backward(Tensor di, Tensor dg, const Tensor& dout, const Tensor& i, const Tensor& g);
// RWKV-6's log decay: g = −exp(w). dw overwritten.
void exp_decay_forward(Tensor g, const Tensor& w);
void exp_decay_backward(Tensor dw, const Tensor& dg, const Tensor& g);
// Mamba-2's step and log decay per head: Δ = softplus(dt + dt_bias), g = −exp(A_log) · Δ.
// dt, delta, g: [N, H]; A_log, dt_bias: [H]. The backward takes ∂L/∂g and ∂L/∂Δ: ddt overwritten,
// dA_log and ddt_bias accumulated.
void ssd_gate_forward(Tensor g, Tensor delta, const Tensor& dt, const Tensor& A_log, const Tensor& dt_bias);
void ssd_gate_backward(Tensor ddt, Tensor dA_log, Tensor ddt_bias, const Tensor& dg, const Tensor& ddelta,
                       const Tensor& dt, const Tensor& A_log, const Tensor& dt_bias);

// HGRN's and HGRN-2's lower bounds, shared by the layers: Γ: [L, C] (one row per layer), p = softmax
// of Γ over the L layers (per channel), lb_ℓ = Σ_{1 ≤ m ≤ ℓ} p_m (so lb_0 = 0, rising with depth).
// lower_bound: [C], this layer's. The backward accumulates into dgamma: with dp_m = dlb for
// 1 ≤ m ≤ ℓ (else 0), dΓ_j += p_j ⊙ (dp_j − Σ_m p_m ⊙ dp_m).
void layer_lower_bound_forward(Tensor lower_bound, const Tensor& gamma, int64_t layer);
void layer_lower_bound_backward(Tensor dgamma, const Tensor& dlower_bound, const Tensor& gamma, int64_t layer);

// ---- element-wise activations: out = act(x) ------------------------------------------------------
// silu(x) = x · σ(x); tanh. The backward takes the forward's input x (silu) or output (tanh) as `saved`.
enum class Activation { silu, tanh };
void activation_forward(Tensor out, const Tensor& x, Activation act);
// dx overwritten; saved = x for silu, out for tanh.
void activation_backward(Tensor dx, const Tensor& dout, const Tensor& saved, Activation act);

// ---- token shift (RWKV-6): delta_t = x_{t−1} − x_t, x_{t−1} = 0 at the start of t's sequence --------
// x, delta: [N, C]. The backward: dx_t = −ddelta_t + ddelta_{t+1} (the latter within t's sequence).
void token_shift_forward(Tensor delta, const Tensor& x, const SeqLayout& seqs);
void token_shift_backward(Tensor dx, const Tensor& ddelta, const SeqLayout& seqs);

// RWKV-6's lerp: out = x + delta ⊙ mu, mu: [N, C] (data-dependent) or [C] (a parameter, the same
// for every row). x, delta, out: [N, C]. The backward adds dout ⊙ mu to ddelta, and writes dmu =
// dout ⊙ delta ([N, C]) or adds Σ_n dout ⊙ delta ([C]); dx = dout is the caller's to add.
void lerp_forward(Tensor out, const Tensor& x, const Tensor& delta, const Tensor& mu);
void lerp_backward(Tensor ddelta, Tensor dmu, const Tensor& dout, const Tensor& delta, const Tensor& mu);

// ---- column blocks of [N, C] tensors -------------------------------------------------------------
// column_slice: out = x[:, begin, begin + c) (out: [N, c]); column_place: out[:, begin, begin + c) = x
// (x: [N, c]; the other columns of out untouched).
void column_slice(Tensor out, const Tensor& x, int64_t begin);
void column_place(Tensor out, const Tensor& x, int64_t begin);

// ---- row copies by index: out[to, :] = in[from, :] for every pair (to, from) of `rows` ----------
// out: [R, C], in: [M, C], one dtype and device, not overlapping; rows: i32 [P, 2] on the host, each
// pair with to < R and from < M, no `to` twice (so the copies commute). For the decoding states' row
// moves (model/input_history.h, the KV cache): on CUDA one upload of the pairs and one kernel, without
// waiting for the device.
void copy_rows(Tensor out, const Tensor& in, const Tensor& rows);

// ---- GroupNorm over the channels of each of G groups (RWKV-6's output norm over heads) ------------
// y = (x − μ) · rstd · w + b per group of C/G channels, μ and rstd = 1/sqrt(var + eps) over the
// group. x, out: [N, C]; weight, bias: [C]; mean, rstd: [N, G] (saved for backward).
void group_norm_forward(Tensor out, Tensor mean, Tensor rstd, const Tensor& x, const Tensor& weight, const Tensor& bias,
                        int64_t groups, double eps);
// dx overwritten; dweight, dbias accumulated.
void group_norm_backward(Tensor dx, Tensor dweight, Tensor dbias, const Tensor& dout, const Tensor& x,
                         const Tensor& weight, const Tensor& mean, const Tensor& rstd, int64_t groups);

// ---- per-head broadcasts (Mamba-2: B and C shared by the heads, Δ and D per head) ------------------
// repeat_heads: out[n, h·K + k] = x[n, k] for H heads (x: [N, K], out: [N, H·K]); its backward
// sum_heads: dx[n, k] = Σ_h dout[n, h·K + k] (overwritten).
void repeat_heads(Tensor out, const Tensor& x, int64_t heads);
void sum_heads(Tensor dx, const Tensor& dout, int64_t heads);
// scale_heads: out[n, h·P + p] = x[n, h·P + p] · s[n, h] (x, out: [N, H·P]; s: [N, H]).
// Backward: dx = dout · s, ds[n, h] = Σ_p dout · x (both overwritten).
void scale_heads_forward(Tensor out, const Tensor& x, const Tensor& s);
void scale_heads_backward(Tensor dx, Tensor ds, const Tensor& dout, const Tensor& x, const Tensor& s);
// add_scaled_heads: y[n, h·P + p] += D[h] · x[n, h·P + p] (D: [H]). Backward: dx += D · dy
// (accumulated, as x has other uses), dD[h] += Σ_{n,p} dy · x.
void add_scaled_heads_forward(Tensor y, const Tensor& x, const Tensor& D);
void add_scaled_heads_backward(Tensor dx, Tensor dD, const Tensor& dy, const Tensor& x, const Tensor& D);

}  // namespace linea::ops
