#include "kernels/cpu/rope.h"

#include <cmath>

#include "kernels/op_arguments.h"
#include "kernels/ops.h"
#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/ops.h"
#endif

namespace linea::ops {

void rope_apply(Tensor x, const Tensor& positions, int64_t heads, double base, bool inverse) {
  OpArguments args("rope_apply");
  args.floating(x, "x", {kAnyDim, kAnyDim});
  args.indices(positions, "positions", {x.dim(0)});
  const int64_t head_dim = args.head_width(x, "x", heads);
  args.require(head_dim % 2 == 0, "x", "expected an even head dimension, got " + std::to_string(head_dim));
  args.require(std::isfinite(base) && base > 0, "base", "expected a finite value > 0, got " + std::to_string(base));
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::rope_apply(x, positions, heads, base, inverse);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::rope_apply(x.data<T>(), positions.data<int32_t>(), x.dim(0), heads, head_dim, base, inverse);
  });
}

}  // namespace linea::ops
