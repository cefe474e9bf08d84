#include "model/layer_lower_bound.h"

#include <stdexcept>

#include "kernels/ops.h"
#include "kernels/random.h"
#include "model/wide_gates.h"

namespace linea {

LayerLowerBound::LayerLowerBound(ParameterSet& params, const std::string& mixer, const LayerPlace& place, int64_t width,
                                 ShardRange columns)
    : layer_(place.index), width_(columns.size) {
  const std::string name = mixer + ".lower_bounds";
  gamma_ = params.find(name);
  if (!gamma_) {
    gamma_ = params.declare(name, {place.count, width}, ParamRole::gate, /*weight_decay=*/false, 1, columns);
  } else if (gamma_->full_shape != Shape{place.count, width} ||
             gamma_->shard_offset != (gamma_->shard_dim < 0 ? 0 : columns.begin)) {
    throw std::invalid_argument("LayerLowerBound: " + name + " is " + shape_string(gamma_->full_shape) +
                                ", but this layer needs " + shape_string({place.count, width}));
  }
}

void LayerLowerBound::init() { fill_constant(gamma_->value, 0.0); }

Tensor LayerLowerBound::forward(StepContext& ctx) const {
  const GateParameter gamma = gate_parameter(ctx, *gamma_);
  Tensor lb = ctx.scratch.alloc({width_}, gamma.value.dtype());
  ops::layer_lower_bound_forward(lb, gamma.value, layer_);
  return lb;
}

void LayerLowerBound::backward(StepContext& ctx, const Tensor& dlb) const {
  const GateParameter gamma = gate_parameter(ctx, *gamma_);
  ops::layer_lower_bound_backward(gamma.grad, dlb, gamma.value, layer_);
}

}  // namespace linea
