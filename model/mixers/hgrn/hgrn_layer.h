// HgrnLayer: HGRN (reference/mixers.md §1.7; fla's HGRNAttention) over W = expand_ratio · d_model
// channels, one scalar state per channel:
//
//   i, f, z = W_i x, W_f x, W_g x                                   (D → W each)
//   g = log(lb_ℓ + (1 − lb_ℓ) σ(f))       (layer ℓ's lower bound; g = logσ(f) at layer 0 or without)
//   u = silu(i) ⊙ (1 − exp(g))
//   h_t = exp(g_t) ⊙ h_{t−1} + u_t                                   (ops::hgrn_*, chunked)
//   y = RMSNorm_W(h) · γ ⊙ silu(z),  out = W_o y                     (W → D)
//
// Parameter names follow fla (i_proj, f_proj, g_proj, g_norm, o_proj; the stack's
// hgrn.lower_bounds). Channels are independent, so under tensor parallelism a rank holds channels
// tp.split_evenly(W): the rows of i, f, g_proj, the columns of o_proj and of the lower bounds; the
// norm over all W channels gathers them (model/full_width_rms_norm.h). In a bf16 step (CUDA) the
// gate runs in f32 on f32 copies of f and i and the f32 master Γ, g stays f32 for the op and u is
// rounded to bf16 (model/wide_gates.h).
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "model/full_width_norm_output.h"
#include "model/layer_lower_bound.h"
#include "model/linear.h"
#include "model/mixer.h"
#include "model/mixer_family.h"
#include "model/mixers/hgrn/hgrn_config.h"
#include "model/mixers/hgrn/hgrn_decode_state.h"
#include "model/tensor_parallel.h"

namespace linea {

class HgrnLayer final : public RunMixer<HgrnDecodeState> {
 public:
  HgrnLayer(ParameterSet& params, const std::string& name, int64_t d_model, const HgrnConfig& config, double norm_eps,
            const TensorParallel& tp, const LayerPlace& place);

  void init(Rng& rng, double std) override;
  void backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) override;
  // Decoding (hgrn_decode.cpp): the recurrence's state h per sequence, [S, channels].
  std::unique_ptr<MixerState> start_state(int64_t sequences) const override;

 private:
  // forward from zero states (state null: training) or continuing `state`.
  Tensor run(StepContext& ctx, const Tensor& x, HgrnDecodeState* state) override;
  // The recurrence's log decay g and input u from the kept projections, in ctx.scratch: g, the
  // lower bound and the gate's inputs f, i in ctx.statistics_dtype(), u in the step's dtype.
  struct Recurrence {
    Tensor lower_bound, f, i, g, u;
  };
  Recurrence recurrence(StepContext& ctx) const;

  ShardRange channels_;  // this rank's of the W
  Linear i_proj_, f_proj_, g_proj_;
  FullWidthNormOutput output_;  // g_norm and o_proj
  std::optional<LayerLowerBound> lower_bound_;

  // Kept by forward: the three projections and the recurrence's output.
  Tensor i_, f_, z_, h_;
};

}  // namespace linea
