#include "kernels/cpu/linear.h"

#include "kernels/op_arguments.h"
#include "kernels/ops.h"

namespace linea::ops {

namespace {
template <class T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
}  // namespace

void linear_forward(Tensor out, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  OpArguments args("linear_forward");
  args.floating(x, "x", {kAnyDim, kAnyDim});
  args.floating(weight, "weight", {kAnyDim, x.dim(1)});
  const int64_t n = x.dim(0), in = x.dim(1), o = weight.dim(0);
  args.optional_floating(bias, "bias", {o}).floating(out, "out", {n, o});
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::linear_forward(out.data<T>(), x.data<T>(), weight.data<T>(), data_or_null<T>(bias), n, in, o);
  });
}

void linear_backward(Tensor dx, Tensor dweight, Tensor dbias, const Tensor& dout, const Tensor& x, const Tensor& weight,
                     bool accumulate_dx) {
  OpArguments args("linear_backward");
  args.floating(x, "x", {kAnyDim, kAnyDim});
  args.floating(weight, "weight", {kAnyDim, x.dim(1)});
  const int64_t n = x.dim(0), in = x.dim(1), o = weight.dim(0);
  args.floating(dout, "dout", {n, o})
      .optional_floating(dx, "dx", {n, in})
      .optional_floating(dweight, "dweight", {o, in})
      .optional_floating(dbias, "dbias", {o});
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::linear_backward(data_or_null<T>(dx), data_or_null<T>(dweight), data_or_null<T>(dbias), dout.data<T>(),
                         x.data<T>(), weight.data<T>(), n, in, o, accumulate_dx);
  });
}

}  // namespace linea::ops
