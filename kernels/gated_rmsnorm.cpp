#include <cmath>

#include "kernels/cpu/rmsnorm.h"
#include "kernels/op_arguments.h"
#include "kernels/ops.h"
#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/ops.h"
#endif

namespace linea::ops {

void gated_rmsnorm_forward(Tensor out, Tensor rstd, const Tensor& o, const Tensor& z, const Tensor& weight,
                           int64_t heads, GateActivation act, double eps) {
  OpArguments args("gated_rmsnorm_forward");
  args.floating(o, "o", {kAnyDim, kAnyDim});
  const int64_t n = o.dim(0), dv = args.head_width(o, "o", heads);
  args.floating(weight, "weight", {dv}).floating(out, "out", o.shape()).statistics(rstd, "rstd", {n, heads});
  if (act != GateActivation::none) args.floating(z, "z", o.shape());
  args.require(std::isfinite(eps) && eps >= 0, "eps", "expected a finite value ≥ 0, got " + std::to_string(eps));
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::gated_rmsnorm_forward(out, rstd, o, z, weight, heads, act, eps);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    const T* z_data = act == GateActivation::none ? nullptr : z.data<T>();
    cpu::rmsnorm_forward<T>(out.data<T>(), rstd.data<T>(), o.data<T>(), z_data, weight.data<T>(), n, heads, dv, act,
                            static_cast<T>(eps));
  });
}

void gated_rmsnorm_backward(Tensor d_o, Tensor dz, Tensor dweight, const Tensor& dout, const Tensor& o, const Tensor& z,
                            const Tensor& weight, const Tensor& rstd, int64_t heads, GateActivation act) {
  OpArguments args("gated_rmsnorm_backward");
  args.floating(o, "o", {kAnyDim, kAnyDim});
  const int64_t n = o.dim(0), dv = args.head_width(o, "o", heads);
  args.floating(dout, "dout", o.shape())
      .floating(weight, "weight", {dv})
      .statistics(rstd, "rstd", {n, heads})
      .floating(d_o, "d_o", o.shape())
      .floating(dweight, "dweight", {dv});
  if (act != GateActivation::none) args.floating(z, "z", o.shape()).floating(dz, "dz", o.shape());
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::gated_rmsnorm_backward(d_o, dz, dweight, dout, o, z, weight, rstd, heads, act);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    const bool gated = act != GateActivation::none;
    cpu::rmsnorm_backward<T>(d_o.data<T>(), gated ? dz.data<T>() : nullptr, dweight.data<T>(), dout.data<T>(),
                             o.data<T>(), gated ? z.data<T>() : nullptr, weight.data<T>(), rstd.data<T>(), n, heads, dv,
                             act);
  });
}

void gated_rmsnorm_backward_recompute(Tensor d_o, Tensor dz, Tensor dweight, Tensor out, const Tensor& dout,
                                      const Tensor& o, const Tensor& z, const Tensor& weight, int64_t heads,
                                      GateActivation act, double eps) {
  OpArguments args("gated_rmsnorm_backward_recompute");
  args.floating(o, "o", {kAnyDim, kAnyDim});
  const int64_t n = o.dim(0), dv = args.head_width(o, "o", heads);
  args.floating(dout, "dout", o.shape())
      .floating(weight, "weight", {dv})
      .floating(d_o, "d_o", o.shape())
      .floating(dweight, "dweight", {dv})
      .floating(out, "out", o.shape());
  if (act != GateActivation::none) args.floating(z, "z", o.shape()).floating(dz, "dz", o.shape());
  args.require(std::isfinite(eps) && eps >= 0, "eps", "expected a finite value ≥ 0, got " + std::to_string(eps));
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) {
    return cuda::gated_rmsnorm_backward(d_o, dz, dweight, dout, o, z, weight, Tensor(), heads, act, Tensor(), out, eps);
  }
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    const bool gated = act != GateActivation::none;
    cpu::rmsnorm_backward<T>(d_o.data<T>(), gated ? dz.data<T>() : nullptr, dweight.data<T>(), dout.data<T>(),
                             o.data<T>(), gated ? z.data<T>() : nullptr, weight.data<T>(), nullptr, n, heads, dv, act,
                             nullptr, out.data<T>(), static_cast<T>(eps));
  });
}

}  // namespace linea::ops
