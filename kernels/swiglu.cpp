#include "kernels/cpu/swiglu.h"

#include "kernels/op_arguments.h"
#include "kernels/ops.h"

namespace linea::ops {

void swiglu_forward(Tensor out, const Tensor& gate, const Tensor& up) {
  OpArguments args("swiglu_forward");
  args.floating(gate, "gate", {kAnyDim, kAnyDim});
  args.floating(up, "up", gate.shape()).floating(out, "out", gate.shape());
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::swiglu_forward(out.data<T>(), gate.data<T>(), up.data<T>(), gate.numel());
  });
}

void swiglu_backward(Tensor dgate, Tensor dup, const Tensor& dout, const Tensor& gate, const Tensor& up) {
  OpArguments args("swiglu_backward");
  args.floating(gate, "gate", {kAnyDim, kAnyDim});
  args.floating(up, "up", gate.shape())
      .floating(dout, "dout", gate.shape())
      .floating(dgate, "dgate", gate.shape())
      .floating(dup, "dup", gate.shape());
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::swiglu_backward(dgate.data<T>(), dup.data<T>(), dout.data<T>(), gate.data<T>(), up.data<T>(), gate.numel());
  });
}

}  // namespace linea::ops
