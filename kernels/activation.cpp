// Checks and CPU dispatch of the element-wise activations (kernels/ops.h).
#include "kernels/cpu/activation.h"

#include "kernels/op_arguments.h"
#include "kernels/ops.h"
#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/ops.h"
#endif

namespace linea::ops {

void activation_forward(Tensor out, const Tensor& x, Activation act) {
  OpArguments args("activation_forward");
  args.floating(x, "x", Shape(static_cast<size_t>(x.ndim()), kAnyDim)).floating(out, "out", x.shape());
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::activation_forward(out, x, act);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::activation_forward(out.data<T>(), x.data<T>(), x.numel(), act);
  });
}

void activation_backward(Tensor dx, const Tensor& dout, const Tensor& saved, Activation act) {
  OpArguments args("activation_backward");
  args.floating(saved, "saved", Shape(static_cast<size_t>(saved.ndim()), kAnyDim));
  args.floating(dout, "dout", saved.shape()).floating(dx, "dx", saved.shape());
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::activation_backward(dx, dout, saved, act);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::activation_backward(dx.data<T>(), dout.data<T>(), saved.data<T>(), saved.numel(), act);
  });
}

}  // namespace linea::ops
