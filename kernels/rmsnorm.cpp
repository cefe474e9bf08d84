#include "kernels/cpu/rmsnorm.h"

#include <cmath>

#include "kernels/op_arguments.h"
#include "kernels/ops.h"
#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/ops.h"
#endif

namespace linea::ops {

// Plain RMSNorm is the grouped kernel with one group per row and no gate.
namespace {
// rmsnorm_forward (with_residual false: residual and sum undefined) and rmsnorm_forward_residual.
void forward(const char* op, bool with_residual, Tensor out, Tensor rstd, Tensor sum, const Tensor& x,
             const Tensor& residual, const Tensor& weight, double eps) {
  OpArguments args(op);
  args.floating(x, "x", {kAnyDim, kAnyDim});
  const int64_t n = x.dim(0), d = x.dim(1);
  args.floating(weight, "weight", {d}).floating(out, "out", {n, d}).statistics(rstd, "rstd", {n});
  if (with_residual) args.floating(residual, "residual", {n, d}).floating(sum, "sum", {n, d});
  args.require(std::isfinite(eps) && eps >= 0, "eps", "expected a finite value ≥ 0, got " + std::to_string(eps));
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) {
    return cuda::gated_rmsnorm_forward(out, rstd, x, Tensor(), weight, 1, GateActivation::none, eps, residual, sum);
  }
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::rmsnorm_forward<T>(out.data<T>(), rstd.data<T>(), x.data<T>(), nullptr, weight.data<T>(), n, 1, d,
                            GateActivation::none, static_cast<T>(eps), with_residual ? residual.data<T>() : nullptr,
                            with_residual ? sum.data<T>() : nullptr);
  });
}
}  // namespace

void rmsnorm_forward(Tensor out, Tensor rstd, const Tensor& x, const Tensor& weight, double eps) {
  forward("rmsnorm_forward", false, out, rstd, Tensor(), x, Tensor(), weight, eps);
}

void rmsnorm_forward_residual(Tensor out, Tensor rstd, Tensor sum, const Tensor& x, const Tensor& residual,
                              const Tensor& weight, double eps) {
  forward("rmsnorm_forward_residual", true, out, rstd, sum, x, residual, weight, eps);
}

namespace {
// rmsnorm_backward (with_residual false: residual undefined) and rmsnorm_backward_residual: one kernel.
void backward(const char* op, bool with_residual, Tensor dx, Tensor dweight, const Tensor& dout, const Tensor& x,
              const Tensor& weight, const Tensor& rstd, const Tensor& residual) {
  OpArguments args(op);
  args.floating(x, "x", {kAnyDim, kAnyDim});
  const int64_t n = x.dim(0), d = x.dim(1);
  args.floating(dout, "dout", {n, d})
      .floating(weight, "weight", {d})
      .statistics(rstd, "rstd", {n})
      .floating(dx, "dx", {n, d})
      .floating(dweight, "dweight", {d});
  if (with_residual) args.floating(residual, "residual", {n, d});
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) {
    return cuda::gated_rmsnorm_backward(dx, Tensor(), dweight, dout, x, Tensor(), weight, rstd, 1, GateActivation::none,
                                        residual);
  }
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::rmsnorm_backward<T>(dx.data<T>(), nullptr, dweight.data<T>(), dout.data<T>(), x.data<T>(), nullptr,
                             weight.data<T>(), rstd.data<T>(), n, 1, d, GateActivation::none,
                             with_residual ? residual.data<T>() : nullptr);
  });
}
}  // namespace

void rmsnorm_backward(Tensor dx, Tensor dweight, const Tensor& dout, const Tensor& x, const Tensor& weight,
                      const Tensor& rstd) {
  backward("rmsnorm_backward", false, dx, dweight, dout, x, weight, rstd, Tensor());
}

void rmsnorm_backward_residual(Tensor dx, Tensor dweight, const Tensor& dout, const Tensor& x, const Tensor& weight,
                               const Tensor& rstd, const Tensor& residual) {
  backward("rmsnorm_backward_residual", true, dx, dweight, dout, x, weight, rstd, residual);
}

}  // namespace linea::ops
