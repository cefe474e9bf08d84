// LayerLowerBound: HGRN's per-layer lower bound of the forget gates (reference/mixers.md §1.7),
// shared by the layers of a stack: one parameter Γ: [L, W] ("<mixer>.lower_bounds", zero-initialised
// as fla's), declared by the first layer that asks for it and found by the others, and
//
//   p = softmax over the L layers of Γ (per channel),   lb_ℓ = Σ_{1 ≤ m ≤ ℓ} p_m
//
// (ops::layer_lower_bound_*), so the bound is 0 at layer 0 and grows with depth. As in fla, layer 0
// takes no bound at all (active() is false there). Under tensor parallelism Γ's columns follow the
// layer's channels.
#pragma once
#include <string>

#include "model/mixer_family.h"
#include "model/parameters.h"
#include "model/step_context.h"

namespace linea {

class LayerLowerBound {
 public:
  // width: the full channel count; columns: this rank's.
  LayerLowerBound(ParameterSet& params, const std::string& mixer, const LayerPlace& place, int64_t width,
                  ShardRange columns);

  bool active() const { return layer_ > 0; }
  void init();  // Γ = 0 (every layer sharing it writes the same zeros)
  // lb_ℓ: [columns.size] in ctx.scratch, in ctx.statistics_dtype() (f32 in a bf16 step, from the
  // f32 master Γ: model/wide_gates.h).
  Tensor forward(StepContext& ctx) const;
  // Accumulates ∂L/∂Γ given dlb = ∂L/∂lb_ℓ (in lb's dtype; into the master gradient in a bf16 step).
  void backward(StepContext& ctx, const Tensor& dlb) const;

 private:
  int64_t layer_, width_;
  Parameter* gamma_;
};

}  // namespace linea
