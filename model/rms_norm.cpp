#include "model/rms_norm.h"

#include "kernels/ops.h"
#include "kernels/random.h"

namespace linea {

RMSNorm::RMSNorm(ParameterSet& params, const std::string& name, int64_t dim, double eps) : dim_(dim), eps_(eps) {
  weight_ = params.declare(name + ".weight", {dim}, ParamRole::vector, /*weight_decay=*/false);
}

void RMSNorm::init() { fill_constant(weight_->value, 1.0); }

Tensor RMSNorm::forward(StepContext& ctx, const Tensor& x) {
  rstd_ = ctx.scratch.alloc({x.dim(0)}, ctx.statistics_dtype());
  Tensor y = ctx.temporary({x.dim(0), dim_});
  ops::rmsnorm_forward(y, rstd_, x, weight_->compute, eps_);
  return y;
}

Tensor RMSNorm::forward_residual(StepContext& ctx, const Tensor& x, const Tensor& residual, Tensor sum) {
  rstd_ = ctx.scratch.alloc({x.dim(0)}, ctx.statistics_dtype());
  Tensor y = ctx.temporary({x.dim(0), dim_});
  ops::rmsnorm_forward_residual(y, rstd_, sum, x, residual, weight_->compute, eps_);
  return y;
}

void RMSNorm::backward(const Tensor& x, const Tensor& dy, Tensor dx, const Tensor& residual) {
  if (residual.defined()) {
    ops::rmsnorm_backward_residual(dx, weight_->compute_grad, dy, x, weight_->compute, rstd_, residual);
  } else {
    ops::rmsnorm_backward(dx, weight_->compute_grad, dy, x, weight_->compute, rstd_);
  }
}

}  // namespace linea
