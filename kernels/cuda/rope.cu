// RoPE (rotate-half), in place on x: [N, H·Dh]. For token n at position p and pair i < Dh/2:
//   θ = ±p · base^(−2i/Dh)   (− for the inverse rotation, which is the backward)
//   (x_i, x_{i+Dh/2}) ← (x_i cos θ − x_{i+Dh/2} sin θ, x_i sin θ + x_{i+Dh/2} cos θ)
// One thread per (n, i) rotates that pair in every head. θ and its sine and cosine are taken in
// double, as the CPU reference does: p · base^(−2i/Dh) reaches ~10⁵ rad, where an f32 angle would
// be off by ~10⁻² rad.
#include "kernels/cuda/check.h"
#include "kernels/cuda/element_types.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/ops.h"

namespace linea::cuda {

namespace {
struct RopeShape {
  int64_t rows, heads, head_dim;
  double base, sign;
};

template <class T>
__global__ void rope_kernel(T* x, const int32_t* positions, RopeShape s) {
  const int64_t half = s.head_dim / 2;
  const int64_t pairs = s.rows * half;
  for (int64_t q = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; q < pairs; q += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = q / half, i = q % half;
    const double inv_freq = pow(s.base, -2.0 * static_cast<double>(i) / static_cast<double>(s.head_dim));
    double sin_theta, cos_theta;
    sincos(s.sign * positions[n] * inv_freq, &sin_theta, &cos_theta);
    const float c = static_cast<float>(cos_theta), sn = static_cast<float>(sin_theta);
    for (int64_t h = 0; h < s.heads; ++h) {
      T* xh = x + (n * s.heads + h) * s.head_dim;
      const float a = to_float(xh[i]), b = to_float(xh[i + half]);
      xh[i] = from_float<T>(a * c - b * sn);
      xh[i + half] = from_float<T>(a * sn + b * c);
    }
  }
}
}  // namespace

void rope_apply(Tensor x, const Tensor& positions, int64_t heads, double base, bool inverse) {
  const RopeShape s{x.dim(0), heads, x.dim(1) / heads, base, inverse ? -1.0 : 1.0};
  const int64_t pairs = s.rows * (s.head_dim / 2);
  if (pairs == 0) return;
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    rope_kernel<T><<<grid_stride_blocks(pairs), kThreadsPerBlock>>>(data_of<T>(x), data_of<int32_t>(positions), s);
    check_launch("rope_kernel");
  });
}

}  // namespace linea::cuda
