// L2 norm per head, on groups of dim = Dh channels (one warp per group, lanes stride over it in
// 16-byte packs when aligned):
//   r = 1 / sqrt(Σ_j x_j² + eps)   (saved, f32),   y_j = x_j · r
// Backward through the saved output: dx_j = r · (dy_j − y_j · Σ_i dy_i · y_i)   (overwritten)
#include "kernels/cuda/check.h"
#include "kernels/cuda/element_types.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/warp_reduce.cuh"

namespace linea::cuda {

namespace {
// Lane l of a group's warp handles the packs l, l + 32, … of W channels.
template <class T, int W>
__global__ void forward_kernel(T* out, float* rstd, const T* x, int64_t groups, int64_t dim, float eps) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / kWarpSize;
  for (int64_t g = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / kWarpSize; g < groups; g += warps) {
    const T* xg = x + g * dim;
    float sum_sq = 0.0f;
    for (int64_t j = int64_t{lane} * W; j < dim; j += kWarpSize * W) {
      const Pack<T, W> v = load_pack<W>(xg + j);
#pragma unroll
      for (int e = 0; e < W; ++e) sum_sq += to_float(v.v[e]) * to_float(v.v[e]);
    }
    const float r = 1.0f / sqrtf(warp_sum(sum_sq) + eps);
    if (lane == 0) rstd[g] = r;
    for (int64_t j = int64_t{lane} * W; j < dim; j += kWarpSize * W) {
      const Pack<T, W> v = load_pack<W>(xg + j);
      Pack<T, W> y;
#pragma unroll
      for (int e = 0; e < W; ++e) y.v[e] = from_float<T>(to_float(v.v[e]) * r);
      store_pack<W>(out + g * dim + j, y);
    }
  }
}

template <class T, int W>
__global__ void backward_kernel(T* dx, const T* dout, const T* out, const float* rstd, int64_t groups, int64_t dim) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / kWarpSize;
  for (int64_t g = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / kWarpSize; g < groups; g += warps) {
    const T* dy = dout + g * dim;
    const T* y = out + g * dim;
    float dot = 0.0f;
    for (int64_t j = int64_t{lane} * W; j < dim; j += kWarpSize * W) {
      const Pack<T, W> a = load_pack<W>(dy + j), b = load_pack<W>(y + j);
#pragma unroll
      for (int e = 0; e < W; ++e) dot += to_float(a.v[e]) * to_float(b.v[e]);
    }
    dot = warp_sum(dot);
    const float r = rstd[g];
    for (int64_t j = int64_t{lane} * W; j < dim; j += kWarpSize * W) {
      const Pack<T, W> a = load_pack<W>(dy + j), b = load_pack<W>(y + j);
      Pack<T, W> d;
#pragma unroll
      for (int e = 0; e < W; ++e) d.v[e] = from_float<T>(r * (to_float(a.v[e]) - to_float(b.v[e]) * dot));
      store_pack<W>(dx + g * dim + j, d);
    }
  }
}
}  // namespace

void l2norm_forward(Tensor out, Tensor rstd, const Tensor& x, int64_t heads, double eps) {
  const int64_t groups = x.dim(0) * heads, dim = x.dim(1) / heads;
  if (groups == 0) return;
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const bool packed = dim % kPackWidth<T> == 0 && aligned16({out.raw(), x.raw()});
    dispatch_pack_width<T>(packed, [&](auto width) {
      forward_kernel<T, decltype(width)::value><<<grid_stride_blocks(groups * kWarpSize), kThreadsPerBlock>>>(
          data_of<T>(out), data_of<float>(rstd), data_of<T>(x), groups, dim, static_cast<float>(eps));
    });
    check_launch("l2norm forward_kernel");
  });
}

void l2norm_backward(Tensor dx, const Tensor& dout, const Tensor& out, const Tensor& rstd, int64_t heads) {
  const int64_t groups = out.dim(0) * heads, dim = out.dim(1) / heads;
  if (groups == 0) return;
  dispatch_float(out.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const bool packed = dim % kPackWidth<T> == 0 && aligned16({dx.raw(), dout.raw(), out.raw()});
    dispatch_pack_width<T>(packed, [&](auto width) {
      backward_kernel<T, decltype(width)::value><<<grid_stride_blocks(groups * kWarpSize), kThreadsPerBlock>>>(
          data_of<T>(dx), data_of<T>(dout), data_of<T>(out), data_of<float>(rstd), groups, dim);
    });
    check_launch("l2norm backward_kernel");
  });
}

}  // namespace linea::cuda
