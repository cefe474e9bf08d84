// Checks and CPU dispatch of the token shift (kernels/ops.h).
#include "kernels/cpu/token_shift.h"

#include "kernels/op_arguments.h"
#include "kernels/ops.h"

namespace linea::ops {

namespace {
void check_layout(const OpArguments& args, const SeqLayout& seqs, const Tensor& x) {
  try {
    seqs.validate(x.dim(0));
  } catch (const std::invalid_argument& e) {
    args.fail("seqs", e.what());
  }
}
}  // namespace

void token_shift_forward(Tensor delta, const Tensor& x, const SeqLayout& seqs) {
  OpArguments args("token_shift_forward");
  args.floating(x, "x", {kAnyDim, kAnyDim}).floating(delta, "delta", x.shape());
  check_layout(args, seqs, x);
  args.require(delta.raw() != x.raw(), "delta", "must not share storage with x");
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::token_shift_forward(delta.data<T>(), x.data<T>(), seqs, x.dim(1));
  });
}

void token_shift_backward(Tensor dx, const Tensor& ddelta, const SeqLayout& seqs) {
  OpArguments args("token_shift_backward");
  args.floating(ddelta, "ddelta", {kAnyDim, kAnyDim}).floating(dx, "dx", ddelta.shape());
  check_layout(args, seqs, ddelta);
  args.require(dx.raw() != ddelta.raw(), "dx", "must not share storage with ddelta");
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::token_shift_backward(dx.data<T>(), ddelta.data<T>(), seqs, ddelta.dim(1));
  });
}

}  // namespace linea::ops
