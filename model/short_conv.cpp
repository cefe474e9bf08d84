#include "model/short_conv.h"

#include "kernels/ops.h"
#include "model/parameter_shard.h"

namespace linea {

ShortConv::ShortConv(ParameterSet& params, const std::string& name, int64_t channels, int64_t kernel,
                     std::optional<ShardRange> shard)
    : channels_(shard ? shard->size : channels) {
  weight_ = params.declare(name + ".weight", {channels, kernel}, ParamRole::conv, /*weight_decay=*/true, shard ? 0 : -1,
                           shard.value_or(ShardRange{}));
}

void ShortConv::init(Rng& rng, double std) { init_normal(*weight_, rng, std); }

Tensor ShortConv::forward(StepContext& ctx, const Tensor& x) {
  Tensor y = ctx.temporary({x.dim(0), channels_});
  ops::short_conv_silu_forward(y, x, weight_->compute, ctx.seqs);
  return y;
}

void ShortConv::backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) {
  ops::short_conv_silu_backward(dx, weight_->compute_grad, dy, x, weight_->compute, ctx.seqs);
}

}  // namespace linea
