// L2 norm per head, on groups of dim = Dh channels (one warp per group, lanes stride over it):
//   r = 1 / sqrt(Σ_j x_j² + eps)   (saved, f32),   y_j = x_j · r
// Backward through the saved output: dx_j = r · (dy_j − y_j · Σ_i dy_i · y_i)   (overwritten)
#include "kernels/cuda/check.h"
#include "kernels/cuda/element_types.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/warp_reduce.cuh"

namespace linea::cuda {

namespace {
template <class T>
__global__ void forward_kernel(T* out, float* rstd, const T* x, int64_t groups, int64_t dim, float eps) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / kWarpSize;
  for (int64_t g = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / kWarpSize; g < groups; g += warps) {
    const T* xg = x + g * dim;
    float sum_sq = 0.0f;
    for (int64_t j = lane; j < dim; j += kWarpSize) {
      const float v = to_float(xg[j]);
      sum_sq += v * v;
    }
    const float r = 1.0f / sqrtf(warp_sum(sum_sq) + eps);
    if (lane == 0) rstd[g] = r;
    for (int64_t j = lane; j < dim; j += kWarpSize) out[g * dim + j] = from_float<T>(to_float(xg[j]) * r);
  }
}

template <class T>
__global__ void backward_kernel(T* dx, const T* dout, const T* out, const float* rstd, int64_t groups, int64_t dim) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / kWarpSize;
  for (int64_t g = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / kWarpSize; g < groups; g += warps) {
    const T* dy = dout + g * dim;
    const T* y = out + g * dim;
    float dot = 0.0f;
    for (int64_t j = lane; j < dim; j += kWarpSize) dot += to_float(dy[j]) * to_float(y[j]);
    dot = warp_sum(dot);
    const float r = rstd[g];
    for (int64_t j = lane; j < dim; j += kWarpSize) {
      dx[g * dim + j] = from_float<T>(r * (to_float(dy[j]) - to_float(y[j]) * dot));
    }
  }
}
}  // namespace

void l2norm_forward(Tensor out, Tensor rstd, const Tensor& x, int64_t heads, double eps) {
  const int64_t groups = x.dim(0) * heads, dim = x.dim(1) / heads;
  if (groups == 0) return;
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    forward_kernel<T><<<grid_stride_blocks(groups * kWarpSize), kThreadsPerBlock>>>(
        data_of<T>(out), data_of<float>(rstd), data_of<T>(x), groups, dim, static_cast<float>(eps));
    check_launch("l2norm forward_kernel");
  });
}

void l2norm_backward(Tensor dx, const Tensor& dout, const Tensor& out, const Tensor& rstd, int64_t heads) {
  const int64_t groups = out.dim(0) * heads, dim = out.dim(1) / heads;
  if (groups == 0) return;
  dispatch_float(out.dtype(), [&](auto zero) {
    using T = decltype(zero);
    backward_kernel<T><<<grid_stride_blocks(groups * kWarpSize), kThreadsPerBlock>>>(
        data_of<T>(dx), data_of<T>(dout), data_of<T>(out), data_of<float>(rstd), groups, dim);
    check_launch("l2norm backward_kernel");
  });
}

}  // namespace linea::cuda
