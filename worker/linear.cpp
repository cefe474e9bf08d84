#include "worker/linear.h"

#include "kernels/ops.h"

namespace linea {

Linear::Linear(ParameterSet& params, const std::string& name, int64_t in, int64_t out, bool bias, ParamRole role)
    : in_(in), out_(out) {
  weight_ = params.declare(name + ".weight", {out, in}, role, /*weight_decay=*/true);
  if (bias) bias_ = params.declare(name + ".bias", {out}, ParamRole::vector, /*weight_decay=*/false);
}

void Linear::init(Rng& rng, double std) {
  fill_normal(weight_->value, rng, 0.0, std);
  if (bias_) bias_->value.zero();
}

Tensor Linear::forward(StepContext& ctx, const Tensor& x) {
  x_ = x;
  Tensor y = ctx.activation({x.dim(0), out_});
  ops::linear_forward(y, x, weight_->value, bias_ ? bias_->value : Tensor());
  return y;
}

void Linear::backward(const Tensor& dy, Tensor dx, bool accumulate_dx) {
  ops::linear_backward(dx, weight_->grad, bias_ ? bias_->grad : Tensor(), dy, x_, weight_->value, accumulate_dx);
}

}  // namespace linea
