#include "model/linear.h"

#include <stdexcept>

#include "kernels/ops.h"
#include "model/parameter_shard.h"

namespace linea {

Linear::Linear(ParameterSet& params, const std::string& name, int64_t in, int64_t out, bool bias, ParamRole role,
               LinearSplit split, ShardRange range)
    : in_(split == LinearSplit::inputs ? range.size : in), out_(split == LinearSplit::outputs ? range.size : out) {
  if (split == LinearSplit::inputs && bias) {
    throw std::invalid_argument("Linear " + name + ": a layer split on its inputs (row-parallel) has no bias");
  }
  const int weight_dim = split == LinearSplit::outputs ? 0 : split == LinearSplit::inputs ? 1 : -1;
  weight_ = params.declare(name + ".weight", {out, in}, role, /*weight_decay=*/true, weight_dim, range);
  if (bias) {
    bias_ = params.declare(name + ".bias", {out}, ParamRole::vector, /*weight_decay=*/false,
                           split == LinearSplit::outputs ? 0 : -1, range);
  }
}

void Linear::init(Rng& rng, double std) {
  init_normal(*weight_, rng, std);
  if (bias_) bias_->value.zero();
}

Tensor Linear::forward(StepContext& ctx, const Tensor& x) {
  Tensor y = ctx.activation({x.dim(0), out_});
  forward(x, y);
  return y;
}

void Linear::forward(const Tensor& x, Tensor y) {
  ops::linear_forward(y, x, weight_->compute, bias_ ? bias_->compute : Tensor());
}

void Linear::backward(const Tensor& x, const Tensor& dy, Tensor dx, bool accumulate_dx) {
  ops::linear_backward(dx, weight_->compute_grad, bias_ ? bias_->compute_grad : Tensor(), dy, x, weight_->compute,
                       accumulate_dx);
}

void Linear::backward_input(const Tensor& dy, Tensor dx, bool accumulate_dx) {
  // linear_backward reads x only for dW: dx stands in for it (the same shape [N, in]).
  ops::linear_backward(dx, Tensor(), Tensor(), dy, dx, weight_->compute, accumulate_dx);
}

void Linear::backward_parameters(const Tensor& x, const Tensor& dy) {
  ops::linear_backward(Tensor(), weight_->compute_grad, bias_ ? bias_->compute_grad : Tensor(), dy, x, weight_->compute,
                       false);
}

void Linear::set_partial_grad(bool partial) {
  weight_->partial_grad = partial;
  if (bias_) bias_->partial_grad = partial;
}

}  // namespace linea
