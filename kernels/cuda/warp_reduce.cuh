// Sums and maxima across the 32 lanes of a warp (butterfly shuffles: every lane ends with the same
// result, computed in the same order on every run).
#pragma once

namespace linea::cuda {

inline constexpr int kWarpSize = 32;

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

}  // namespace linea::cuda
