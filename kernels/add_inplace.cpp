#include "kernels/cpu/add_inplace.h"

#include "kernels/op_arguments.h"
#include "kernels/ops.h"
#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/ops.h"
#endif

namespace linea::ops {

void add_inplace(Tensor y, const Tensor& x) {
  OpArguments args("add_inplace");
  args.floating(y, "y", Shape(static_cast<size_t>(y.ndim()), kAnyDim)).floating(x, "x", y.shape());
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::add_inplace(y, x);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::add_inplace(y.data<T>(), x.data<T>(), y.numel());
  });
}

}  // namespace linea::ops
