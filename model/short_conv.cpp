#include "model/short_conv.h"

#include "kernels/ops.h"
#include "model/parameter_shard.h"

namespace linea {

ShortConv::ShortConv(ParameterSet& params, const std::string& name, int64_t channels, int64_t kernel,
                     std::optional<ShardRange> shard, bool bias)
    : channels_(shard ? shard->size : channels) {
  weight_ = params.declare(name + ".weight", {channels, kernel}, ParamRole::conv, /*weight_decay=*/true, shard ? 0 : -1,
                           shard.value_or(ShardRange{}));
  if (bias) {
    bias_ = params.declare(name + ".bias", {channels}, ParamRole::vector, /*weight_decay=*/false, shard ? 0 : -1,
                           shard.value_or(ShardRange{}));
  }
}

void ShortConv::set_partial_grad(bool partial) {
  weight_->partial_grad = partial;
  if (bias_) bias_->partial_grad = partial;
}

void ShortConv::init(Rng& rng, double std) {
  init_normal(*weight_, rng, std);
  if (bias_) fill_constant(bias_->value, 0.0);
}

Tensor ShortConv::forward(StepContext& ctx, const Tensor& x) {
  Tensor y = ctx.temporary({x.dim(0), channels_});
  ops::short_conv_silu_forward(y, x, weight_->compute, ctx.seqs, bias_ ? bias_->compute : Tensor());
  return y;
}

InputHistory ShortConv::start_history(int64_t sequences) const {
  return InputHistory(sequences, weight_->compute.dim(1) - 1, channels_, weight_->compute.dtype(),
                      weight_->compute.device());
}

Tensor ShortConv::forward_continuing(StepContext& ctx, const Tensor& x, InputHistory& history) const {
  return history.forward(ctx, x, ctx.seqs, [&](const Tensor& in, const SeqLayout& seqs) {
    Tensor y = ctx.temporary(in.shape());
    ops::short_conv_silu_forward(y, in, weight_->compute, seqs, bias_ ? bias_->compute : Tensor());
    return y;
  });
}

void ShortConv::backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) {
  ops::short_conv_silu_backward(dx, weight_->compute_grad, dy, x, weight_->compute, ctx.seqs,
                                bias_ ? bias_->compute : Tensor(), bias_ ? bias_->compute_grad : Tensor());
}

}  // namespace linea
