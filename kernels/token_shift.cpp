// Checks and CPU dispatch of the token shift (kernels/ops.h).
#include "kernels/cpu/token_shift.h"

#include "kernels/op_arguments.h"
#include "kernels/ops.h"
#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/ops.h"
#endif

namespace linea::ops {

void token_shift_forward(Tensor delta, const Tensor& x, const SeqLayout& seqs) {
  OpArguments args("token_shift_forward");
  args.floating(x, "x", {kAnyDim, kAnyDim}).floating(delta, "delta", x.shape());
  args.layout(seqs, x.dim(0));
  args.require(delta.raw() != x.raw(), "delta", "must not share storage with x");
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::token_shift_forward(delta, x, seqs);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::token_shift_forward(delta.data<T>(), x.data<T>(), seqs, x.dim(1));
  });
}

void token_shift_backward(Tensor dx, const Tensor& ddelta, const SeqLayout& seqs) {
  OpArguments args("token_shift_backward");
  args.floating(ddelta, "ddelta", {kAnyDim, kAnyDim}).floating(dx, "dx", ddelta.shape());
  args.layout(seqs, ddelta.dim(0));
  args.require(dx.raw() != ddelta.raw(), "dx", "must not share storage with ddelta");
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::token_shift_backward(dx, ddelta, seqs);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::token_shift_backward(dx.data<T>(), ddelta.data<T>(), seqs, ddelta.dim(1));
  });
}

namespace {
// Checks mu against x: [N, C]; returns whether it has one row per row of x.
bool check_mu(OpArguments& args, const Tensor& mu, const Tensor& x) {
  args.require(mu.defined() && (mu.ndim() == 1 || mu.ndim() == 2), "mu",
               "expected [N, C] or [C], got " + mu.describe());
  const bool per_row = mu.ndim() == 2;
  args.floating(mu, "mu", per_row ? x.shape() : Shape{x.dim(1)});
  return per_row;
}
}  // namespace

void lerp_forward(Tensor out, const Tensor& x, const Tensor& delta, const Tensor& mu) {
  OpArguments args("lerp_forward");
  args.floating(x, "x", {kAnyDim, kAnyDim}).floating(delta, "delta", x.shape()).floating(out, "out", x.shape());
  const bool per_row = check_mu(args, mu, x);
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::lerp_forward(out, x, delta, mu);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::lerp_forward(out.data<T>(), x.data<T>(), delta.data<T>(), mu.data<T>(), per_row, x.dim(0), x.dim(1));
  });
}

void lerp_backward(Tensor ddelta, Tensor dmu, const Tensor& dout, const Tensor& delta, const Tensor& mu) {
  OpArguments args("lerp_backward");
  args.floating(delta, "delta", {kAnyDim, kAnyDim}).floating(dout, "dout", delta.shape());
  args.floating(ddelta, "ddelta", delta.shape());
  const bool per_row = check_mu(args, mu, delta);
  args.floating(dmu, "dmu", mu.shape());
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::lerp_backward(ddelta, dmu, dout, delta, mu);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::lerp_backward(ddelta.data<T>(), dmu.data<T>(), dout.data<T>(), delta.data<T>(), mu.data<T>(), per_row,
                       delta.dim(0), delta.dim(1));
  });
}

}  // namespace linea::ops
