// Storage types of the CUDA ops and their conversions: tensors hold float or __nv_bfloat16 (bf16,
// round-to-nearest-even on store, as linea::bf16 on the host); all arithmetic is in float.
// dispatch_float(dtype, fn) calls fn(float{}) or fn(__nv_bfloat16{}) for an f32 or bf16 tensor.
// Pack<T, W> is W elements moved as one aligned access (16 bytes when W = 16 / sizeof(T));
// dispatch_pack_width picks W at run time from the pointers' alignment.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>

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

template <int W, class T>
__device__ __forceinline__ Pack<T, W> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, W>*>(p);
}
template <int W, class T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, W>& v) {
  *reinterpret_cast<Pack<T, W>*>(p) = v;
}

// True when every pointer is 16-byte aligned (null counts as aligned).
inline bool aligned16(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

// Calls fn(std::integral_constant<int, W>{}) with W = kPackWidth<T> when `packed`, else W = 1.
template <class T, class Fn>
void dispatch_pack_width(bool packed, Fn&& fn) {
  if (packed) {
    fn(std::integral_constant<int, kPackWidth<T>>{});
  } else {
    fn(std::integral_constant<int, 1>{});
  }
}

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
