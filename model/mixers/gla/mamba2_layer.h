// Mamba2Layer: Mamba-2 / SSD (reference/mixers.md §1.9; fla's Mamba2), d_in = expand·D channels in
// H = d_in/P heads of P = head_dim, one group (G = 1) of state size N:
//
//   z, x, B, C, dt = W_z u, W_x u, W_B u, W_C u, W_dt u        (D → d_in, d_in, N, N, H)
//   x, B, C ← silu(conv(·) + bias)                              (depthwise, kernel 4, with bias)
//   Δ = softplus(dt + dt_bias),  g = −exp(A_log)·Δ              (one step and log decay per head)
//   o = gla(q = C, k = B, v = Δ ⊙ x, g), scale 1                (B and C shared by the heads)
//   y = o + D_h ⊙ x,  out = W_o RMSNorm_{d_in}(y ⊙ silu(z))      (norm after the gate, over d_in)
//
// fla's in_proj is the concatenation of W_z, W_x, W_B, W_C, W_dt and its conv1d that of the three
// convs (same parameter count): held apart here so that under tensor parallelism a rank holds heads
// tp.shard_heads(H) of z, x, dt, their conv channels, A_log, dt_bias, D and the columns of out_proj,
// while B and C (one group for all heads) are whole on every rank with partial gradients. The norm
// over all of d_in gathers the heads (model/full_width_rms_norm.h). Init as fla: A ~ U(1, 16),
// dt ∈ [dt_min, dt_max] (≥ dt_floor), D = 1, conv biases 0. In a bf16 step (CUDA) the gate runs in
// f32 on an f32 copy of dt and the f32 master A_log, dt_bias: g stays f32 for the op, Δ is rounded to
// bf16 for v = Δ ⊙ x, ∂L/∂Δ widened and ddt rounded back (model/wide_gates.h).
#pragma once
#include <memory>
#include <string>

#include "model/full_width_norm_output.h"
#include "model/linear.h"
#include "model/mixer.h"
#include "model/mixers/gla/gla.h"
#include "model/mixers/gla/gla_configs.h"
#include "model/mixers/gla/gla_decode_state.h"
#include "model/short_conv.h"
#include "model/tensor_parallel.h"

namespace linea {

class Mamba2Layer final : public RunMixer<GlaDecodeState> {
 public:
  Mamba2Layer(ParameterSet& params, const std::string& name, int64_t d_model, const Mamba2Config& config,
              double norm_eps, const TensorParallel& tp);

  void init(Rng& rng, double std) override;
  void backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) override;
  // Decoding (gla_decode.cpp): the op's state and the layer's input histories (GlaDecodeState).
  std::unique_ptr<MixerState> start_state(int64_t sequences) const override;

 private:
  // forward from zero states (state null: training) or continuing `state`.
  Tensor run(StepContext& ctx, const Tensor& x, GlaDecodeState* state) override;
  // The op's operands (and the conv outputs and Δ they come from), in ctx.scratch.
  struct Operands {
    Tensor xc, bc, cc;  // silu(conv(·) + bias) of x, B, C
    Tensor delta;       // Δ [N, H], in the step's dtype
    Tensor dt;          // the gate's input dt [N, H], in g's dtype (ctx.statistics_dtype())
    ops::GlaInputs in;  // q = C, k = B per head, v = Δ ⊙ x, g
  };
  Operands operands(StepContext& ctx, GlaDecodeState* state = nullptr);
  // y = o + D ⊙ x, and y ⊙ silu(z), in ctx.scratch.
  Tensor skip(StepContext& ctx, const Operands& op) const;
  Tensor gated(StepContext& ctx, const Tensor& y) const;

  Mamba2Config config_;
  ops::GlaSpec spec_;
  HeadShard shard_;
  int64_t heads_, inner_;  // of this rank: heads, heads · P
  Linear z_proj_, x_proj_, B_proj_, C_proj_, dt_proj_;
  ShortConv x_conv_, B_conv_, C_conv_;
  Parameter *A_log_, *dt_bias_, *D_;
  FullWidthNormOutput output_;  // norm and out_proj

  Tensor z_, xs_, B_, C_, dt_, o_;  // kept by forward: the projections (xs_: the x of xBC), the op's output
  Tensor saved_;                    // what the op saved for its backward (ops::gla_saved_bytes)
};

}  // namespace linea
