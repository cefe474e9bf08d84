// Checks and CPU dispatch of the per-head broadcasts (kernels/ops.h).
#include "kernels/cpu/head_broadcast.h"

#include "kernels/op_arguments.h"
#include "kernels/ops.h"
#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/ops.h"
#endif

namespace linea::ops {

namespace {
const Shape kMatrix = {kAnyDim, kAnyDim};
}  // namespace

void repeat_heads(Tensor out, const Tensor& x, int64_t heads) {
  OpArguments args("repeat_heads");
  args.require(heads >= 1, "heads", "expected at least one head, got " + std::to_string(heads));
  args.floating(x, "x", kMatrix).floating(out, "out", {x.dim(0), heads * x.dim(1)});
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::repeat_heads(out, x, heads);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::repeat_heads(out.data<T>(), x.data<T>(), x.dim(0), heads, x.dim(1));
  });
}

void sum_heads(Tensor dx, const Tensor& dout, int64_t heads) {
  OpArguments args("sum_heads");
  args.floating(dout, "dout", kMatrix);
  const int64_t width = args.head_width(dout, "dout", heads);
  args.floating(dx, "dx", {dout.dim(0), width});
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::sum_heads(dx, dout, heads);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::sum_heads(dx.data<T>(), dout.data<T>(), dout.dim(0), heads, width);
  });
}

void scale_heads_forward(Tensor out, const Tensor& x, const Tensor& s) {
  OpArguments args("scale_heads_forward");
  args.floating(x, "x", kMatrix).floating(s, "s", {x.dim(0), kAnyDim});
  const int64_t width = args.head_width(x, "x", s.dim(1), "s's head count");
  args.floating(out, "out", x.shape());
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::scale_heads_forward(out, x, s);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::scale_heads_forward(out.data<T>(), x.data<T>(), s.data<T>(), x.dim(0), s.dim(1), width);
  });
}

void scale_heads_backward(Tensor dx, Tensor ds, const Tensor& dout, const Tensor& x, const Tensor& s) {
  OpArguments args("scale_heads_backward");
  args.floating(x, "x", kMatrix).floating(s, "s", {x.dim(0), kAnyDim});
  const int64_t width = args.head_width(x, "x", s.dim(1), "s's head count");
  args.floating(dout, "dout", x.shape()).floating(dx, "dx", x.shape()).floating(ds, "ds", s.shape());
  args.require(dx.raw() != x.raw(), "dx", "must not share storage with x");
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::scale_heads_backward(dx, ds, dout, x, s);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::scale_heads_backward(dx.data<T>(), ds.data<T>(), dout.data<T>(), x.data<T>(), s.data<T>(), x.dim(0), s.dim(1),
                              width);
  });
}

void add_scaled_heads_forward(Tensor y, const Tensor& x, const Tensor& D) {
  OpArguments args("add_scaled_heads_forward");
  args.floating(x, "x", kMatrix).floating(D, "D", {kAnyDim});
  const int64_t width = args.head_width(x, "x", D.dim(0), "D's head count");
  args.floating(y, "y", x.shape());
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::add_scaled_heads_forward(y, x, D);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::add_scaled_heads_forward(y.data<T>(), x.data<T>(), D.data<T>(), x.dim(0), D.dim(0), width);
  });
}

void add_scaled_heads_backward(Tensor dx, Tensor dD, const Tensor& dy, const Tensor& x, const Tensor& D) {
  OpArguments args("add_scaled_heads_backward");
  args.floating(x, "x", kMatrix).floating(D, "D", {kAnyDim});
  const int64_t width = args.head_width(x, "x", D.dim(0), "D's head count");
  args.floating(dy, "dy", x.shape()).floating(dx, "dx", x.shape()).floating(dD, "dD", D.shape());
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::add_scaled_heads_backward(dx, dD, dy, x, D);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::add_scaled_heads_backward(dx.data<T>(), dD.data<T>(), dy.data<T>(), x.data<T>(), D.data<T>(), x.dim(0),
                                   D.dim(0), width);
  });
}

}  // namespace linea::ops
