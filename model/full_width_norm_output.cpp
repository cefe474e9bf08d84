#include "model/full_width_norm_output.h"

namespace linea {

FullWidthNormOutput::FullWidthNormOutput(ParameterSet& params, const std::string& norm_name,
                                         const std::string& proj_name, int64_t width, int64_t d_model,
                                         ShardRange columns, ops::GateActivation act, double eps,
                                         const TensorParallel& tp)
    : gated_(act != ops::GateActivation::none),
      norm_(params, norm_name, width, columns, act, eps, tp),
      proj_(params, proj_name, width, d_model, false, ParamRole::matrix, LinearSplit::inputs, columns) {}

void FullWidthNormOutput::init(Rng& rng, double std) {
  norm_.init();
  proj_.init(rng, std);
}

Tensor FullWidthNormOutput::forward(StepContext& ctx, const Tensor& x, const Tensor& z) {
  Tensor y = ctx.temporary(x.shape());
  norm_.forward(ctx, x, z, y);
  return proj_.forward(ctx, y);
}

FullWidthNormOutput::Grads FullWidthNormOutput::backward(StepContext& ctx, const Tensor& x, const Tensor& z,
                                                         const Tensor& dy) {
  Tensor y = ctx.temporary(x.shape());
  norm_.forward(ctx, x, z, y);
  Tensor dnormed = ctx.temporary(x.shape());
  proj_.backward(y, dy, dnormed, false);
  Grads g{ctx.temporary(x.shape()), gated_ ? ctx.temporary(x.shape()) : Tensor()};
  norm_.backward(ctx, x, z, dnormed, g.dx, g.dz);
  return g;
}

}  // namespace linea
