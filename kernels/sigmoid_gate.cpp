#include "kernels/cpu/sigmoid_gate.h"

#include <cmath>

#include "kernels/op_arguments.h"
#include "kernels/ops.h"

namespace linea::ops {

namespace {
void check_scale(const OpArguments& args, double scale) {
  args.require(std::isfinite(scale) && scale > 0, "scale", "expected a finite value > 0, got " + std::to_string(scale));
}
}  // namespace

void sigmoid_gate_forward(Tensor beta, const Tensor& logits, double scale) {
  OpArguments args("sigmoid_gate_forward");
  args.floating(logits, "logits", Shape(static_cast<size_t>(logits.ndim()), kAnyDim));
  args.floating(beta, "beta", logits.shape());
  check_scale(args, scale);
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::sigmoid_gate_forward(beta.data<T>(), logits.data<T>(), logits.numel(), static_cast<T>(scale));
  });
}

void sigmoid_gate_backward(Tensor dlogits, const Tensor& dbeta, const Tensor& beta, double scale) {
  OpArguments args("sigmoid_gate_backward");
  args.floating(beta, "beta", Shape(static_cast<size_t>(beta.ndim()), kAnyDim));
  args.floating(dbeta, "dbeta", beta.shape()).floating(dlogits, "dlogits", beta.shape());
  check_scale(args, scale);
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::sigmoid_gate_backward(dlogits.data<T>(), dbeta.data<T>(), beta.data<T>(), beta.numel(), static_cast<T>(scale));
  });
}

}  // namespace linea::ops
