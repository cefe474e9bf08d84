// Elementwise maps on the GPU: for every i < n, (out_0[i], …) = f(i, in_0[i], …), with T storage
// (float or __nv_bfloat16) and float arithmetic.
//
// f is a functor with `__device__ void operator()(int64_t i, const float (&in)[kIn],
// float (&out)[kOut]) const`; i lets it read per-column parameters. When every pointer is 16-byte
// aligned each thread moves packs of 16 bytes per tensor, else one element at a time. Every input
// of an element is read before its outputs are written, so an output may alias an input.
#pragma once
#include <array>
#include <cstdint>

#include "kernels/cuda/check.h"
#include "kernels/cuda/element_types.cuh"
#include "kernels/cuda/launch.h"

namespace linea::cuda {

template <class T, int kIn, int kOut>
struct MapPointers {
  const T* in[kIn];
  T* out[kOut];
};

// Elements [first, first + W) of every tensor, W a compile-time width.
template <class T, int W, int kIn, int kOut, class F>
__device__ __forceinline__ void map_pack(const MapPointers<T, kIn, kOut>& p, int64_t first, const F& f) {
  Pack<T, W> in[kIn], out[kOut];
#pragma unroll
  for (int k = 0; k < kIn; ++k) in[k] = *reinterpret_cast<const Pack<T, W>*>(p.in[k] + first);
#pragma unroll
  for (int e = 0; e < W; ++e) {
    float x[kIn], y[kOut];
#pragma unroll
    for (int k = 0; k < kIn; ++k) x[k] = to_float(in[k].v[e]);
    f(first + e, x, y);
#pragma unroll
    for (int k = 0; k < kOut; ++k) out[k].v[e] = from_float<T>(y[k]);
  }
#pragma unroll
  for (int k = 0; k < kOut; ++k) *reinterpret_cast<Pack<T, W>*>(p.out[k] + first) = out[k];
}

// Packs of W elements by a grid-stride loop, then the n mod W elements left one per thread.
template <class T, int W, int kIn, int kOut, class F>
__global__ void map_kernel(int64_t n, MapPointers<T, kIn, kOut> p, F f) {
  const int64_t packs = n / W;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t thread = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (int64_t q = thread; q < packs; q += stride) map_pack<T, W>(p, q * W, f);
  const int64_t rest = packs * W + thread;
  if (rest < n) map_pack<T, 1>(p, rest, f);
}

template <class T, int kIn, int kOut, class F>
void map_elements(int64_t n, const std::array<const T*, kIn>& in, const std::array<T*, kOut>& out, const F& f) {
  if (n == 0) return;
  MapPointers<T, kIn, kOut> p;
  bool aligned = true;
  for (int k = 0; k < kIn; ++k) {
    p.in[k] = in[k];
    aligned = aligned && aligned16({in[k]});
  }
  for (int k = 0; k < kOut; ++k) {
    p.out[k] = out[k];
    aligned = aligned && aligned16({out[k]});
  }
  dispatch_pack_width<T>(aligned, [&](auto width) {
    constexpr int W = decltype(width)::value;
    map_kernel<T, W><<<grid_stride_blocks(n / W + 1), kThreadsPerBlock>>>(n, p, f);
  });
  check_launch("map_kernel");
}

}  // namespace linea::cuda
