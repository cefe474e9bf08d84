#include "worker/low_rank_linear.h"

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

Tensor LowRankLinear::forward(StepContext& ctx, const Tensor& x) { return up_.forward(ctx, down_.forward(ctx, x)); }

void LowRankLinear::backward(StepContext& ctx, const Tensor& dy, Tensor dx, bool accumulate_dx) {
  Tensor dmid = ctx.temporary({dy.dim(0), rank_});
  up_.backward(dy, dmid, false);
  down_.backward(dmid, dx, accumulate_dx);
}

}  // namespace linea
