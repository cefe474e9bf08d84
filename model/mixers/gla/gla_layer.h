// GlaLayer: GLA and RetNet (reference/mixers.md §1.5, §1.6; fla's GatedLinearAttention and
// MultiScaleRetention), H heads of key width K and value width V:
//
//   q, k, v = W_q x, W_k x, W_v x                             (D → H·K, H·K, H·V)
//   q, k, v ← silu(ShortConv(·))                              (when conv > 0: fla's use_short_conv)
//   GLA:    g = logσ(W_gk2 W_gk1 x + b) / gate_normalizer     (low rank gate_rank, per key channel)
//   RetNet: q, k ← RoPE(q, k);  g_h = log(1 − 2^{−5−h})       (fixed per head; h the global head)
//   o = gla(q, k, v, g), scale 1/√K                           (model/mixers/gla/gla.h, chunked)
//   y = RMSNorm_per_head(o) · γ ⊙ silu(W_g x)                 (γ: [V]; plain norm without output gate)
//   out = W_o y                                                (H·V → D)
// The short convs (config key conv, the kernel size W; 0, the default, for none) are depthwise
// causal convs of width W without bias, each followed by SiLU, as the delta rule's (model/short_conv.h).
// Parameter names follow fla (q_proj, k_proj, v_proj, q_conv1d, k_conv1d, v_conv1d, gk_proj.0/1,
// g_proj, g_norm, o_proj). Under tensor parallelism a rank holds heads tp.shard_heads(H) and
// everything of them, as the delta rule (the rows of q, k, v, g_proj, gk_proj.1 and its bias, their
// conv channels, the columns of o_proj); gk_proj.0 and γ are whole, with partial gradients. In a
// bf16 step (CUDA) the log decays are f32, from an f32 copy of the gate logits, and their gradient
// is rounded back to bf16 (model/wide_gates.h).
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "kernels/ops.h"
#include "model/head_norm_output.h"
#include "model/linear.h"
#include "model/low_rank_linear.h"
#include "model/mixer.h"
#include "model/mixers/gla/gla.h"
#include "model/mixers/gla/gla_configs.h"
#include "model/mixers/gla/gla_decode_state.h"
#include "model/short_conv.h"
#include "model/tensor_parallel.h"

namespace linea {

class GlaLayer final : public RunMixer<GlaDecodeState> {
 public:
  GlaLayer(ParameterSet& params, const std::string& name, int64_t d_model, const GlaConfig& config, double norm_eps,
           const TensorParallel& tp);
  GlaLayer(ParameterSet& params, const std::string& name, int64_t d_model, const RetNetConfig& config, double norm_eps,
           const TensorParallel& tp);

  void init(Rng& rng, double std) override;
  void backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) override;
  // Decoding (gla_decode.cpp): the op's state and the layer's input histories (GlaDecodeState).
  std::unique_ptr<MixerState> start_state(int64_t sequences) const override;

 private:
  // forward from zero states (state null: training) or continuing `state`.
  Tensor run(StepContext& ctx, const Tensor& x, GlaDecodeState* state) override;
  // What the two mixers share: the heads and widths, GLA's gate or RetNet's RoPE.
  struct Shape {
    bool retnet;
    int64_t heads, d_k, d_v;
    int64_t gate_rank;       // GLA
    double gate_normalizer;  // GLA
    bool output_gate;
    double rope_theta;  // RetNet
    int64_t conv;       // the short convs' kernel size; 0: none
    bool recompute;     // the config's: no saved buffer
  };
  GlaLayer(ParameterSet& params, const std::string& name, int64_t d_model, const Shape& shape, double norm_eps,
           const TensorParallel& tp);
  // The op's q, k (after the convs, then RoPE for RetNet), v and g, from what forward keeps, in
  // ctx.scratch; the convs continue state's input histories when it is given.
  ops::GlaInputs operands(StepContext& ctx, GlaDecodeState* state = nullptr);

  Shape shape_;
  ops::GlaSpec spec_;
  HeadShard shard_;
  int64_t heads_, key_width_, value_width_;  // of this rank
  Linear q_proj_, k_proj_, v_proj_;
  std::optional<ShortConv> q_conv_, k_conv_, v_conv_;
  std::optional<LowRankLinear> gk_proj_;  // GLA
  std::optional<Linear> g_proj_;          // the output gate
  HeadNormOutput output_;                 // g_norm and o_proj

  // Kept by forward: the projections (before the convs: backward recomputes the convs), the op's
  // output, what the op saved for its backward.
  Tensor q_, k_, v_, gk_, z_, o_, saved_;
};

}  // namespace linea
