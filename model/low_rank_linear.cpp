#include "model/low_rank_linear.h"

#include <stdexcept>

namespace linea {

namespace {
LinearSplit checked_split(LinearSplit split, const std::string& name) {
  if (split == LinearSplit::inputs) {
    throw std::invalid_argument("LowRankLinear " + name + ": only its outputs can be split");
  }
  return split;
}
}  // namespace

LowRankLinear::LowRankLinear(ParameterSet& params, const std::string& name, int64_t in, int64_t rank, int64_t out,
                             bool bias, LinearSplit split, ShardRange range)
    : rank_(rank),
      down_(params, name + ".0", in, rank, false),
      up_(params, name + ".1", rank, out, bias, ParamRole::matrix, checked_split(split, name), range) {
  down_.weight().partial_grad = up_.weight().shard_dim >= 0;
}

void LowRankLinear::init(Rng& rng, double std) {
  down_.init(rng, std);
  up_.init(rng, std);
}

Tensor LowRankLinear::forward(StepContext& ctx, const Tensor& x) {
  Tensor y = ctx.activation({x.dim(0), up_.out_features()});
  forward(ctx, x, y);
  return y;
}

void LowRankLinear::forward(StepContext& ctx, const Tensor& x, Tensor y) {
  inner_ = down_.forward(ctx, x);
  up_.forward(inner_, y);
}

void LowRankLinear::backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx, bool accumulate_dx) {
  Tensor dinner = ctx.temporary({dy.dim(0), rank_});
  up_.backward(inner_, dy, dinner, false);
  down_.backward(x, dinner, dx, accumulate_dx);
}

}  // namespace linea
