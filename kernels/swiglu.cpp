#include "kernels/cpu/swiglu.h"

#include "kernels/op_arguments.h"
#include "kernels/ops.h"
#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/ops.h"
#endif

namespace linea::ops {

void swiglu_forward(Tensor out, const Tensor& gate, const Tensor& up) {
  OpArguments args("swiglu_forward");
  args.floating(gate, "gate", {kAnyDim, kAnyDim});
  args.floating(up, "up", gate.shape()).floating(out, "out", gate.shape());
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::swiglu_forward(out, gate, up);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::swiglu_forward(out.data<T>(), gate.data<T>(), up.data<T>(), gate.numel());
  });
}

namespace {
// swiglu_backward (with_product false: out undefined) and swiglu_backward_with_product: one kernel.
void backward(const char* op, bool with_product, Tensor dgate, Tensor dup, Tensor out, const Tensor& dout,
              const Tensor& gate, const Tensor& up) {
  OpArguments args(op);
  args.floating(gate, "gate", {kAnyDim, kAnyDim});
  args.floating(up, "up", gate.shape())
      .floating(dout, "dout", gate.shape())
      .floating(dgate, "dgate", gate.shape())
      .floating(dup, "dup", gate.shape());
  if (with_product) args.floating(out, "out", gate.shape());
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::swiglu_backward(dgate, dup, dout, gate, up, out);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::swiglu_backward(dgate.data<T>(), dup.data<T>(), dout.data<T>(), gate.data<T>(), up.data<T>(), gate.numel(),
                         with_product ? out.data<T>() : nullptr);
  });
}
}  // namespace

void swiglu_backward(Tensor dgate, Tensor dup, const Tensor& dout, const Tensor& gate, const Tensor& up) {
  backward("swiglu_backward", false, dgate, dup, Tensor(), dout, gate, up);
}

void swiglu_backward_with_product(Tensor dgate, Tensor dup, Tensor out, const Tensor& dout, const Tensor& gate,
                                  const Tensor& up) {
  backward("swiglu_backward_with_product", true, dgate, dup, out, dout, gate, up);
}

}  // namespace linea::ops
