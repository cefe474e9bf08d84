// X = G / (‖G‖_F + 1e-7);  `steps` times:  A = X·Xᵀ,  B = b·A + c·A·A,  X ← a·X + B·X;  out = X.
// Each B and Y starts as a copy (of A, of X) that the GEMM's beta scales: B = c·A·A + b·B,
// Y = 1·B·X + a·Y.
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/cuda/check.h"
#include "kernels/cuda/element_types.cuh"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/newton_schulz.h"
#include "kernels/cuda/optimizer_math.h"
#include "kernels/cuda/scratch.h"

namespace linea::cuda {

namespace {

constexpr float kA = 3.4445f, kB = -4.7750f, kC = 2.0315f;
constexpr double kNormEps = 1e-7;

// x = T(g · s), s = float(1 / (sqrt(*sum_sq) + 1e-7)) (the product in f32, as on the CPU)
template <class T>
__global__ void normalise_kernel(const float* g, T* x, int64_t n, const double* sum_sq) {
  const float s = static_cast<float>(1.0 / (sqrt(*sum_sq) + kNormEps));
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = from_float<T>(__fmul_rn(g[i], s));
  }
}

// out = float(x)
template <class T>
__global__ void widen_kernel(const T* x, float* out, int64_t n) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = to_float(x[i]);
  }
}

template <class T>
void copy_on_stream(T* dst, const T* src, int64_t n) {
  check_cuda(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(T), cudaMemcpyDeviceToDevice, 0),
             "newton_schulz: cudaMemcpyAsync");
}

template <class T>
void run(const float* g, float* out, int64_t rows, int64_t cols, int steps, T* workspace, DType precision) {
  const bool tall = rows > cols;
  const int64_t m = std::min(rows, cols), n = std::max(rows, cols), numel = rows * cols;
  T* x = workspace;  // X (m × n), or Xᵀ (n × m) when tall
  T* y = x + numel;
  T* a = y + numel;  // m × m
  T* b = a + m * m;  // m × m
  const GemmOperands types{precision, precision};

  const std::vector<void*> sums = scratch({sum_of_squares_partials() * sizeof(double), sizeof(double)});
  auto* sum_sq = static_cast<double*>(sums[1]);
  sum_of_squares_to_device(g, numel, static_cast<double*>(sums[0]), sum_sq);
  normalise_kernel<T><<<grid_stride_blocks(numel), kThreadsPerBlock>>>(g, x, numel, sum_sq);
  check_launch("newton_schulz normalise_kernel");

  for (int step = 0; step < steps; ++step) {
    if (tall) {
      gemm(true, false, m, m, n, 1.0f, x, m, x, m, 0.0f, a, m, types);  // A = (Xᵀ)ᵀ·Xᵀ
    } else {
      gemm(false, true, m, m, n, 1.0f, x, n, x, n, 0.0f, a, m, types);  // A = X·Xᵀ
    }
    copy_on_stream(b, a, m * m);
    gemm(false, false, m, m, m, kC, a, m, a, m, kB, b, m, types);  // B = c·A·A + b·A
    copy_on_stream(y, x, numel);
    if (tall) {
      gemm(false, true, n, m, m, 1.0f, x, m, b, m, kA, y, m, types);  // Yᵀ = Xᵀ·Bᵀ + a·Xᵀ
    } else {
      gemm(false, false, m, n, m, 1.0f, b, m, x, n, kA, y, n, types);  // Y = B·X + a·X
    }
    std::swap(x, y);
  }
  widen_kernel<T><<<grid_stride_blocks(numel), kThreadsPerBlock>>>(x, out, numel);
  check_launch("newton_schulz widen_kernel");
}

}  // namespace

void newton_schulz(const float* g, float* out, int64_t rows, int64_t cols, int steps, DType precision,
                   void* workspace) {
  if (rows == 0 || cols == 0) return;
  dispatch_float(precision, [&](auto zero) {
    using T = decltype(zero);
    run<T>(g, out, rows, cols, steps, static_cast<T*>(workspace), precision);
  });
}

}  // namespace linea::cuda
