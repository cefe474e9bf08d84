// Checks and CPU dispatch of GroupNorm (kernels/ops.h).
#include "kernels/cpu/group_norm.h"

#include <cmath>

#include "kernels/op_arguments.h"
#include "kernels/ops.h"
#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/ops.h"
#endif

namespace linea::ops {

namespace {
// Checks x: [N, C] against weight: [C] and groups; returns C / groups.
void check_groups(OpArguments& args, const Tensor& x, const Tensor& weight, int64_t groups) {
  args.floating(x, "x", {kAnyDim, kAnyDim}).floating(weight, "weight", {x.dim(1)});
  args.head_width(x, "x", groups, "groups");
}
}  // namespace

void group_norm_forward(Tensor out, Tensor mean, Tensor rstd, const Tensor& x, const Tensor& weight, const Tensor& bias,
                        int64_t groups, double eps) {
  OpArguments args("group_norm_forward");
  check_groups(args, x, weight, groups);
  args.floating(bias, "bias", {x.dim(1)}).floating(out, "out", x.shape());
  args.statistics(mean, "mean", {x.dim(0), groups}).statistics(rstd, "rstd", {x.dim(0), groups});
  args.require(std::isfinite(eps) && eps > 0, "eps", "expected a finite value > 0, got " + std::to_string(eps));
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::group_norm_forward(out, mean, rstd, x, weight, bias, groups, eps);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::group_norm_forward(out.data<T>(), mean.data<T>(), rstd.data<T>(), x.data<T>(), weight.data<T>(),
                            bias.data<T>(), x.dim(0), x.dim(1), groups, static_cast<T>(eps));
  });
}

void group_norm_backward(Tensor dx, Tensor dweight, Tensor dbias, const Tensor& dout, const Tensor& x,
                         const Tensor& weight, const Tensor& mean, const Tensor& rstd, int64_t groups) {
  OpArguments args("group_norm_backward");
  check_groups(args, x, weight, groups);
  args.floating(dout, "dout", x.shape()).floating(dx, "dx", x.shape());
  args.floating(dweight, "dweight", weight.shape()).floating(dbias, "dbias", weight.shape());
  args.statistics(mean, "mean", {x.dim(0), groups}).statistics(rstd, "rstd", {x.dim(0), groups});
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::group_norm_backward(dx, dweight, dbias, dout, x, weight, mean, rstd, groups);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::group_norm_backward(dx.data<T>(), dweight.data<T>(), dbias.data<T>(), dout.data<T>(), x.data<T>(),
                             weight.data<T>(), mean.data<T>(), rstd.data<T>(), x.dim(0), x.dim(1), groups);
  });
}

}  // namespace linea::ops
