#include "kernels/cpu/l2norm.h"

#include <cmath>

#include "kernels/op_arguments.h"
#include "kernels/ops.h"

namespace linea::ops {

void l2norm_forward(Tensor out, Tensor rstd, const Tensor& x, int64_t heads, double eps) {
  OpArguments args("l2norm_forward");
  args.floating(x, "x", {kAnyDim, kAnyDim});
  const int64_t dh = args.head_width(x, "x", heads);
  args.floating(out, "out", x.shape()).floating(rstd, "rstd", {x.dim(0), heads});
  args.require(std::isfinite(eps) && eps >= 0, "eps", "expected a finite value ≥ 0, got " + std::to_string(eps));
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::l2norm_forward(out.data<T>(), rstd.data<T>(), x.data<T>(), x.dim(0) * heads, dh, static_cast<T>(eps));
  });
}

void l2norm_backward(Tensor dx, const Tensor& dout, const Tensor& out, const Tensor& rstd, int64_t heads) {
  OpArguments args("l2norm_backward");
  args.floating(out, "out", {kAnyDim, kAnyDim});
  const int64_t dh = args.head_width(out, "out", heads);
  args.floating(dout, "dout", out.shape()).floating(rstd, "rstd", {out.dim(0), heads}).floating(dx, "dx", out.shape());
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::l2norm_backward(dx.data<T>(), dout.data<T>(), out.data<T>(), rstd.data<T>(), out.dim(0) * heads, dh);
  });
}

}  // namespace linea::ops
