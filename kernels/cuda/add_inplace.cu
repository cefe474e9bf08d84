// y += x, elementwise.
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/ops.h"

namespace linea::cuda {

namespace {
// out = y + x
struct Add {
  __device__ void operator()(int64_t, const float (&in)[2], float (&out)[1]) const { out[0] = in[0] + in[1]; }
};
}  // namespace

void add_inplace(Tensor y, const Tensor& x) {
  dispatch_float(y.dtype(), [&](auto zero) {
    using T = decltype(zero);
    map_elements<T, 2, 1>(y.numel(), {data_of<T>(y), data_of<T>(x)}, {data_of<T>(y)}, Add{});
  });
}

}  // namespace linea::cuda
