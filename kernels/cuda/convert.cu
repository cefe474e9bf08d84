// Element type conversion on the GPU: out[i] = round_To(in[i]), or with `accumulate`
// out[i] = round_To(out[i] + in[i]) with the sum in f32 (one rounding to bf16: round-to-nearest-even).
#include "kernels/cuda/check.h"
#include "kernels/cuda/element_types.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/ops.h"

namespace linea::cuda {

namespace {

template <class To, class From>
__global__ void convert_kernel(To* out, const From* in, int64_t n, bool accumulate) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float x = to_float(in[i]);
    out[i] = from_float<To>(accumulate ? to_float(out[i]) + x : x);
  }
}

}  // namespace

void convert(Tensor out, const Tensor& in, bool accumulate) {
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch_float(out.dtype(), [&](auto to) {
    dispatch_float(in.dtype(), [&](auto from) {
      using To = decltype(to);
      using From = decltype(from);
      convert_kernel<To, From>
          <<<grid_stride_blocks(n), kThreadsPerBlock>>>(data_of<To>(out), data_of<From>(in), n, accumulate);
    });
  });
  check_launch("convert_kernel");
}

}  // namespace linea::cuda
