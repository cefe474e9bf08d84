// Hgrn2Layer: HGRN-2 (reference/mixers.md §1.8; fla's HGRN2Attention), H heads of forget width
// K = expand_ratio and value width V = D/H:
//
//   q = silu(W_q x),  f = W_f x                          (D → H·K each)
//   g = log(lb_ℓ + (1 − lb_ℓ) σ(f))                      (layer ℓ's lower bound; logσ(f) at layer 0)
//   i = W_i x                                             (D → H·V)
//   o = gla(q, k = 1 − exp(g), v = i, g), scale 1/√K      (the key tied to the gate)
//   y = RMSNorm over all H·V channels of o · γ,  out = W_o y   (no output gate)
// Parameter names follow fla (q_proj, f_proj, i_proj, g_norm, o_proj; the stack's
// hgrn2.lower_bounds). Under tensor parallelism a rank holds heads tp.shard_heads(H): the rows of
// q, f, i_proj, the columns of o_proj and of the lower bounds; the norm over all channels gathers
// them (model/full_width_rms_norm.h). In a bf16 step (CUDA) g is formed and kept in f32, from an
// f32 copy of f and the f32 master Γ, and df is rounded back to bf16 (model/wide_gates.h).
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "model/full_width_norm_output.h"
#include "model/layer_lower_bound.h"
#include "model/linear.h"
#include "model/mixer.h"
#include "model/mixer_family.h"
#include "model/mixers/gla/gla.h"
#include "model/mixers/gla/gla_configs.h"
#include "model/mixers/gla/gla_decode_state.h"
#include "model/tensor_parallel.h"

namespace linea {

class Hgrn2Layer final : public RunMixer<GlaDecodeState> {
 public:
  Hgrn2Layer(ParameterSet& params, const std::string& name, int64_t d_model, const Hgrn2Config& config, double norm_eps,
             const TensorParallel& tp, const LayerPlace& place);

  void init(Rng& rng, double std) override;
  void backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) override;
  // Decoding (gla_decode.cpp): the op's state and the layer's input histories (GlaDecodeState).
  std::unique_ptr<MixerState> start_state(int64_t sequences) const override;

 private:
  // forward from zero states (state null: training) or continuing `state`.
  Tensor run(StepContext& ctx, const Tensor& x, GlaDecodeState* state) override;
  // The op's q = silu(W_q x), g (with this layer's lower bound) and v, in ctx.scratch; g, the
  // lower bound and the gate's input f in ctx.statistics_dtype().
  struct Operands {
    ops::GlaInputs in;
    Tensor lower_bound, f;
  };
  Operands operands(StepContext& ctx) const;

  int64_t d_k_, d_v_;
  bool recompute_;  // the config's: no saved buffer
  ops::GlaSpec spec_;
  HeadShard shard_;
  int64_t heads_, key_width_, value_width_;  // of this rank
  Linear q_proj_, f_proj_, i_proj_;
  FullWidthNormOutput output_;  // g_norm and o_proj
  std::optional<LayerLowerBound> lower_bound_;

  Tensor q_, f_, i_, o_;  // kept by forward: the projections, the op's output
  Tensor saved_;          // what the op saved for its backward (ops::gla_saved_bytes)
};

}  // namespace linea
