#include "kernels/cpu/rmsnorm.h"

#include <cmath>

#include "kernels/op_arguments.h"
#include "kernels/ops.h"

namespace linea::ops {

// Plain RMSNorm is the grouped kernel with one group per row and no gate.
void rmsnorm_forward(Tensor out, Tensor rstd, const Tensor& x, const Tensor& weight, double eps) {
  OpArguments args("rmsnorm_forward");
  args.floating(x, "x", {kAnyDim, kAnyDim});
  const int64_t n = x.dim(0), d = x.dim(1);
  args.floating(weight, "weight", {d}).floating(out, "out", {n, d}).floating(rstd, "rstd", {n});
  args.require(std::isfinite(eps) && eps >= 0, "eps", "expected a finite value ≥ 0, got " + std::to_string(eps));
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::rmsnorm_forward<T>(out.data<T>(), rstd.data<T>(), x.data<T>(), nullptr, weight.data<T>(), n, 1, d,
                            GateActivation::none, static_cast<T>(eps));
  });
}

void rmsnorm_backward(Tensor dx, Tensor dweight, const Tensor& dout, const Tensor& x, const Tensor& weight,
                      const Tensor& rstd) {
  OpArguments args("rmsnorm_backward");
  args.floating(x, "x", {kAnyDim, kAnyDim});
  const int64_t n = x.dim(0), d = x.dim(1);
  args.floating(dout, "dout", {n, d})
      .floating(weight, "weight", {d})
      .floating(rstd, "rstd", {n})
      .floating(dx, "dx", {n, d})
      .floating(dweight, "dweight", {d});
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::rmsnorm_backward<T>(dx.data<T>(), nullptr, dweight.data<T>(), dout.data<T>(), x.data<T>(), nullptr,
                             weight.data<T>(), rstd.data<T>(), n, 1, d, GateActivation::none);
  });
}

}  // namespace linea::ops
