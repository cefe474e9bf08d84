// GlaLayer: GLA and RetNet (reference/mixers.md §1.5, §1.6; fla's GatedLinearAttention and
// MultiScaleRetention), H heads of key width K and value width V:
//
//   q, k, v = W_q x, W_k x, W_v x                             (D → H·K, H·K, H·V)
//   GLA:    g = logσ(W_gk2 W_gk1 x + b) / gate_normalizer     (low rank gate_rank, per key channel)
//   RetNet: q, k ← RoPE(q, k);  g_h = log(1 − 2^{−5−h})       (fixed per head; h the global head)
//   o = gla(q, k, v, g), scale 1/√K                           (model/mixers/gla/gla.h, chunked)
//   y = RMSNorm_per_head(o) · γ ⊙ silu(W_g x)                 (γ: [V]; plain norm without output gate)
//   out = W_o y                                                (H·V → D)
// Parameter names follow fla (q_proj, k_proj, v_proj, gk_proj.0/1, g_proj, g_norm, o_proj). Under
// tensor parallelism a rank holds heads tp.shard_heads(H) and everything of them, as the delta rule
// (the rows of q, k, v, g_proj, gk_proj.1 and its bias, the columns of o_proj); gk_proj.0 and γ are
// whole, with partial gradients. In a bf16 step (CUDA) the log decays are f32, from an f32 copy of
// the gate logits, and their gradient is rounded back to bf16 (model/wide_gates.h).
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
    bool recompute;     // the config's: no saved buffer
  };
  GlaLayer(ParameterSet& params, const std::string& name, int64_t d_model, const Shape& shape, double norm_eps,
           const TensorParallel& tp);
  // The op's q, k (after RoPE for RetNet), v and g, from what forward keeps, in ctx.scratch.
  ops::GlaInputs operands(StepContext& ctx) const;

  Shape shape_;
  ops::GlaSpec spec_;
  HeadShard shard_;
  int64_t heads_, key_width_, value_width_;  // of this rank
  Linear q_proj_, k_proj_, v_proj_;
  std::optional<LowRankLinear> gk_proj_;  // GLA
  std::optional<Linear> g_proj_;          // the output gate
  HeadNormOutput output_;                 // g_norm and o_proj

  // Kept by forward: the projections, the op's output, what the op saved for its backward.
  Tensor q_, k_, v_, gk_, z_, o_, saved_;
};

}  // namespace linea
