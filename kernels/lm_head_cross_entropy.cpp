#include "kernels/cpu/lm_head_cross_entropy.h"

#include <cmath>

#include "kernels/op_arguments.h"
#include "kernels/ops.h"

namespace linea::ops {

double lm_head_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& targets, double loss_scale, Tensor dx,
                             Tensor dweight) {
  OpArguments args("lm_head_cross_entropy");
  args.floating(x, "x", {kAnyDim, kAnyDim});
  args.floating(weight, "weight", {kAnyDim, x.dim(1)});
  const int64_t n = x.dim(0), d = x.dim(1), v = weight.dim(0);
  args.require(v >= 1, "weight", "expected a vocabulary of at least one row, got " + weight.describe());
  args.indices(targets, "targets", {n})
      .optional_floating(dx, "dx", x.shape())
      .optional_floating(dweight, "dweight", weight.shape());
  args.require(std::isfinite(loss_scale), "loss_scale", "expected a finite value, got " + std::to_string(loss_scale));
  return args.dispatch([&](auto zero) {
    using T = decltype(zero);
    args.require_indices_in_range(targets, "targets", 0, v, -1);
    return cpu::lm_head_cross_entropy<T>(x.data<T>(), weight.data<T>(), targets.data<int32_t>(), n, d, v,
                                         static_cast<T>(loss_scale), dx.defined() ? dx.data<T>() : nullptr,
                                         dweight.defined() ? dweight.data<T>() : nullptr,
                                         cpu::lm_head_rows_per_block(v));
  });
}

}  // namespace linea::ops
