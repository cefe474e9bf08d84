// RMSNorm over the feature dimension: y = x / sqrt(mean(x²) + eps) · w, w: [D] (initialised to 1).
// Saves nothing for the step: forward writes y and the per-row rstd to ctx.scratch (temporaries,
// cheap to recompute) and keeps a view of that rstd; backward(x, dy, dx) reads it, so it must
// follow a forward on the same x since ctx.scratch was last reset (a caller that resets the scratch
// in between runs forward again first: Block recomputes y there, which the projections reading y
// need for their weight gradients anyway). backward overwrites dx and accumulates dw; given a
// residual (the residual stream's gradient, may be dx itself), it adds it into dx in the same pass.
#pragma once
#include <string>

#include "model/parameters.h"
#include "model/step_context.h"

namespace linea {

class RMSNorm {
 public:
  RMSNorm(ParameterSet& params, const std::string& name, int64_t dim, double eps);

  void init();
  Tensor forward(StepContext& ctx, const Tensor& x);
  // The residual stream's add fused in: sum = x + residual (sum may be x or residual), returns the
  // norm of sum, which is then the input that backward takes.
  Tensor forward_residual(StepContext& ctx, const Tensor& x, const Tensor& residual, Tensor sum);
  // x: the input of the latest forward. dx = ∂L/∂x through the norm (+ residual when defined).
  void backward(const Tensor& x, const Tensor& dy, Tensor dx, const Tensor& residual = Tensor());

 private:
  int64_t dim_;
  double eps_;
  Parameter* weight_;
  Tensor rstd_;  // of the latest forward, in ctx.scratch
};

}  // namespace linea
