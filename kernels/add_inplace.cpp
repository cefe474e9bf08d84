#include "kernels/cpu/add_inplace.h"

#include "kernels/op_arguments.h"
#include "kernels/ops.h"

namespace linea::ops {

void add_inplace(Tensor y, const Tensor& x) {
  OpArguments args("add_inplace");
  args.floating(y, "y", Shape(static_cast<size_t>(y.ndim()), kAnyDim)).floating(x, "x", y.shape());
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::add_inplace(y.data<T>(), x.data<T>(), y.numel());
  });
}

}  // namespace linea::ops
