// Storage types of the CUDA ops and their conversions: tensors hold float or __nv_bfloat16 (bf16,
// round-to-nearest-even on store, as linea::bf16 on the host); all arithmetic is in float.
// dispatch_float(dtype, fn) calls fn(float{}) or fn(__nv_bfloat16{}) for an f32 or bf16 tensor.
// Pack<T, W> is W elements moved as one aligned access (16 bytes when W = 16 / sizeof(T)).
#pragma once
#include <cuda_bf16.h>

#include <stdexcept>
#include <string>

#include "kernels/tensor.h"

namespace linea::cuda {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Elements of T per 16-byte access.
template <class T>
inline constexpr int kPackWidth = static_cast<int>(16 / sizeof(T));

template <class T, int W>
struct alignas(sizeof(T) * W) Pack {
  T v[W];
};

// The element pointer of a tensor already checked to hold T.
template <class T>
T* data_of(const Tensor& t) {
  return static_cast<T*>(t.raw());
}

template <class Fn>
decltype(auto) dispatch_float(DType dtype, Fn&& fn) {
  if (dtype == DType::f32) return fn(float{});
  if (dtype == DType::bf16) return fn(__nv_bfloat16{});
  throw std::invalid_argument("cuda: expected an f32 or bf16 tensor, got " + std::string(dtype_name(dtype)));
}

}  // namespace linea::cuda
