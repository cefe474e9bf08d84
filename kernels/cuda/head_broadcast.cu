// Per-head broadcasts of Mamba-2 (kernels/ops.h), f32 arithmetic; rows n, H heads of width P:
//   repeat_heads:      out[n, h·P + p] = x[n, p]
//   sum_heads:         dx[n, p] = Σ_h dout[n, h·P + p]                        (overwritten, h in order)
//   scale_heads:       out[n, h·P + p] = x[n, h·P + p] · s[n, h]
//     backward:        dx = dout · s,  ds[n, h] = Σ_p dout · x                 (both overwritten)
//   add_scaled_heads:  y[n, h·P + p] += D[h] · x[n, h·P + p]
//     backward:        dx += D[h] · dy,  dD[h] += Σ_{n,p} dy · x   (column sums over n per channel,
//                      then per head over its channels in order: deterministic, formed first)
// scale_heads' backward runs one warp per (row, head): lanes stride over p, ds is a warp reduction.
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/warp_reduce.cuh"

namespace linea::cuda {

namespace {
// One thread per element of out [rows, heads · width] (grid stride).
template <class T>
__global__ void repeat_kernel(T* out, const T* x, int64_t rows, int64_t heads, int64_t width) {
  const int64_t n = rows * heads * width;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / (heads * width), p = i % width;
    out[i] = x[row * width + p];
  }
}

// One thread per element of dx [rows, width].
template <class T>
__global__ void sum_kernel(T* dx, const T* dout, int64_t rows, int64_t heads, int64_t width) {
  const int64_t n = rows * width;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / width, p = i % width;
    float sum = 0.0f;
    for (int64_t h = 0; h < heads; ++h) sum += to_float(dout[(row * heads + h) * width + p]);
    dx[i] = from_float<T>(sum);
  }
}

// A per-(row, head) factor: factor[i / width] for element i of [rows, heads · width].
template <class T>
struct ScaleForward {  // in: x
  const T* s;
  int64_t width;
  __device__ void operator()(int64_t i, const float (&in)[1], float (&out)[1]) const {
    out[0] = in[0] * to_float(s[i / width]);
  }
};

template <class T>
__global__ void scale_backward_kernel(T* dx, T* ds, const T* dout, const T* x, const T* s, int64_t groups,
                                      int64_t width) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / kWarpSize;
  for (int64_t q = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / kWarpSize; q < groups; q += warps) {
    const float factor = to_float(s[q]);
    float sum = 0.0f;
    for (int64_t p = lane; p < width; p += kWarpSize) {
      const int64_t i = q * width + p;
      const float d = to_float(dout[i]);
      sum += d * to_float(x[i]);
      dx[i] = from_float<T>(d * factor);
    }
    sum = warp_sum(sum);
    if (lane == 0) ds[q] = from_float<T>(sum);
  }
}

// A per-head factor: D[(i / width) mod heads].
template <class T>
struct HeadFactor {
  const T* D;
  int64_t heads, width;
  __device__ float at(int64_t i) const { return to_float(D[(i / width) % heads]); }
};

template <class T>
struct AddScaled {  // in: y, x; out: y
  HeadFactor<T> f;
  __device__ void operator()(int64_t i, const float (&in)[2], float (&out)[1]) const {
    out[0] = in[0] + f.at(i) * in[1];
  }
};

// f(n, j) = dy[n, j] · x[n, j] over the heads · width channels j.
template <class T>
struct ProductTerm {
  const T *dy, *x;
  int64_t channels;
  __device__ float operator()(int64_t n, int64_t j) const {
    return to_float(dy[n * channels + j]) * to_float(x[n * channels + j]);
  }
};

unsigned stride_blocks(int64_t n) { return static_cast<unsigned>(grid_stride_blocks(n)); }
}  // namespace

void repeat_heads(Tensor out, const Tensor& x, int64_t heads) {
  const int64_t rows = x.dim(0), width = x.dim(1);
  if (rows * heads * width == 0) return;
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    repeat_kernel<T>
        <<<stride_blocks(rows * heads * width), kThreadsPerBlock>>>(data_of<T>(out), data_of<T>(x), rows, heads, width);
    check_launch("repeat_heads repeat_kernel");
  });
}

void sum_heads(Tensor dx, const Tensor& dout, int64_t heads) {
  const int64_t rows = dx.dim(0), width = dx.dim(1);
  if (rows * width == 0) return;
  dispatch_float(dout.dtype(), [&](auto zero) {
    using T = decltype(zero);
    sum_kernel<T>
        <<<stride_blocks(rows * width), kThreadsPerBlock>>>(data_of<T>(dx), data_of<T>(dout), rows, heads, width);
    check_launch("sum_heads sum_kernel");
  });
}

void scale_heads_forward(Tensor out, const Tensor& x, const Tensor& s) {
  const int64_t width = x.dim(1) / s.dim(1);
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    map_elements<T, 1, 1>(x.numel(), {data_of<T>(x)}, {data_of<T>(out)}, ScaleForward<T>{data_of<T>(s), width});
  });
}

void scale_heads_backward(Tensor dx, Tensor ds, const Tensor& dout, const Tensor& x, const Tensor& s) {
  const int64_t groups = s.numel(), width = groups == 0 ? 0 : x.dim(1) / s.dim(1);
  if (groups == 0) return;
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    scale_backward_kernel<T><<<stride_blocks(groups * kWarpSize), kThreadsPerBlock>>>(
        data_of<T>(dx), data_of<T>(ds), data_of<T>(dout), data_of<T>(x), data_of<T>(s), groups, width);
    check_launch("scale_heads scale_backward_kernel");
  });
}

void add_scaled_heads_forward(Tensor y, const Tensor& x, const Tensor& D) {
  const int64_t heads = D.dim(0), width = x.dim(1) / heads;
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    map_elements<T, 2, 1>(x.numel(), {data_of<T>(y), data_of<T>(x)}, {data_of<T>(y)},
                          AddScaled<T>{{data_of<T>(D), heads, width}});
  });
}

void add_scaled_heads_backward(Tensor dx, Tensor dD, const Tensor& dy, const Tensor& x, const Tensor& D) {
  const int64_t rows = x.dim(0), channels = x.dim(1), heads = D.dim(0), width = channels / heads;
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if (rows > 0 && channels > 0) {
      const std::vector<void*> pieces =
          scratch({static_cast<size_t>(channels) * sizeof(float), column_sum_partials_bytes(rows, channels)});
      float* channel_sums = static_cast<float*>(pieces[0]);
      check_cuda(cudaMemsetAsync(channel_sums, 0, static_cast<size_t>(channels) * sizeof(float)), "cudaMemsetAsync");
      add_column_sums(channel_sums, static_cast<float*>(pieces[1]), rows, channels,
                      ProductTerm<T>{data_of<T>(dy), data_of<T>(x), channels});
      add_group_sums(data_of<T>(dD), channel_sums, heads, width);
    }
    map_elements<T, 2, 1>(x.numel(), {data_of<T>(dx), data_of<T>(dy)}, {data_of<T>(dx)},
                          AddScaled<T>{{data_of<T>(D), heads, width}});
  });
}

}  // namespace linea::cuda
