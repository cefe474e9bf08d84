// AdamW, Muon's momentum and update, gradient scaling and the sum of squares, on f32 buffers.
// The _rn intrinsics keep nvcc from fusing a product into a sum, so that each update rounds
// exactly as the CPU loop does.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/optimizer_math.h"
#include "kernels/cuda/scratch.h"

namespace linea::cuda {

namespace {

constexpr int kSumThreads = 256;
constexpr int kSumBlocks = 1024;  // most partial sums; also the threads of the final sum

struct AdamWConstants {
  float decay_factor, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, bc2_sqrt, eps;
  double grad_scale;
};

// float(double(x)·factor), rounded as the CPU loops round it (exact for factor 1)
__device__ __forceinline__ float scaled(float x, double factor) {
  return __double2float_rn(__dmul_rn(static_cast<double>(x), factor));
}

// g = scaled(grad, grad_scale);
// θ ← θ·decay;  m ← β1·m + (1 − β1)·g;  v ← β2·v + (1 − β2)·g·g;  θ ← θ − step_size·m / (sqrt(v)/bc2 + eps)
__global__ void adamw_kernel(float* theta, const float* grad, float* m, float* v, int64_t n, AdamWConstants c) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float g = scaled(grad[i], c.grad_scale);
    float t = __fmul_rn(theta[i], c.decay_factor);
    const float mi = __fadd_rn(__fmul_rn(c.beta1, m[i]), __fmul_rn(c.one_minus_beta1, g));
    const float vi = __fadd_rn(__fmul_rn(c.beta2, v[i]), __fmul_rn(__fmul_rn(c.one_minus_beta2, g), g));
    const float denominator = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), c.bc2_sqrt), c.eps);
    t = __fsub_rn(t, __fdiv_rn(__fmul_rn(c.step_size, mi), denominator));
    theta[i] = t;
    m[i] = mi;
    v[i] = vi;
  }
}

// g = scaled(grad, grad_scale);  B ← μ·B + g;  u = g + μ·B
__global__ void nesterov_kernel(float* momentum, float* u, const float* grad, int64_t n, float mu, double grad_scale) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float g = scaled(grad[i], grad_scale);
    const float b = __fadd_rn(__fmul_rn(mu, momentum[i]), g);
    momentum[i] = b;
    u[i] = __fadd_rn(g, __fmul_rn(mu, b));
  }
}

// θ ← θ·decay − scale·o
__global__ void decay_and_subtract_kernel(float* theta, const float* o, int64_t n, float decay, float scale) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    theta[i] = __fsub_rn(__fmul_rn(theta[i], decay), __fmul_rn(scale, o[i]));
  }
}

// x ← float(double(x)·factor)
__global__ void scale_kernel(float* x, int64_t n, double factor) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = scaled(x[i], factor);
  }
}

// Sums `values` of each thread of the block in a fixed tree; thread 0 gets the total.
template <int kThreads>
__device__ double block_sum(double value) {
  __shared__ double shared[kThreads];
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] = __dadd_rn(shared[threadIdx.x], shared[threadIdx.x + half]);
    __syncthreads();
  }
  return shared[0];
}

// partials[b] = Σ x[i]² over i ≡ thread (mod grid threads) of block b, in f64
__global__ void partial_squares_kernel(const float* x, int64_t n, double* partials) {
  double s = 0;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const double xi = x[i];
    s = __fma_rn(xi, xi, s);
  }
  const double total = block_sum<kSumThreads>(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

// *total = Σ partials[0 .. count)
__global__ void total_kernel(const double* partials, int count, double* total) {
  const double sum = block_sum<kSumBlocks>(threadIdx.x < count ? partials[threadIdx.x] : 0.0);
  if (threadIdx.x == 0) *total = sum;
}

}  // namespace

void adamw_update(float* theta, const float* grad, float* m, float* v, int64_t n, const AdamWCoefficients& c) {
  if (n == 0) return;
  const auto beta1 = static_cast<float>(c.beta1), beta2 = static_cast<float>(c.beta2);
  // (1 − β) is formed in f32 from the f32 β, as the CPU loop does
  const AdamWConstants k{static_cast<float>(c.decay_factor),
                         beta1,
                         1.0f - beta1,
                         beta2,
                         1.0f - beta2,
                         static_cast<float>(c.step_size),
                         static_cast<float>(c.bias_correction2_sqrt),
                         static_cast<float>(c.eps),
                         c.grad_scale};
  adamw_kernel<<<grid_stride_blocks(n), kThreadsPerBlock>>>(theta, grad, m, v, n, k);
  check_launch("adamw_kernel");
}

void nesterov_momentum(float* momentum, float* u, const float* grad, int64_t n, double mu, double grad_scale) {
  if (n == 0) return;
  nesterov_kernel<<<grid_stride_blocks(n), kThreadsPerBlock>>>(momentum, u, grad, n, static_cast<float>(mu),
                                                               grad_scale);
  check_launch("nesterov_kernel");
}

void decay_and_subtract(float* theta, const float* o, int64_t n, double decay_factor, double scale) {
  if (n == 0) return;
  decay_and_subtract_kernel<<<grid_stride_blocks(n), kThreadsPerBlock>>>(theta, o, n, static_cast<float>(decay_factor),
                                                                         static_cast<float>(scale));
  check_launch("decay_and_subtract_kernel");
}

void scale(float* x, int64_t n, double factor) {
  if (n == 0) return;
  scale_kernel<<<grid_stride_blocks(n), kThreadsPerBlock>>>(x, n, factor);
  check_launch("scale_kernel");
}

int64_t sum_of_squares_partials() { return kSumBlocks; }

void sum_of_squares_to_device(const float* x, int64_t n, double* partials, double* total) {
  // The grid depends on n only, so the tree is the same on every run and every device.
  const int blocks = static_cast<int>(std::clamp<int64_t>(ceil_div(n, kSumThreads), 1, kSumBlocks));
  partial_squares_kernel<<<blocks, kSumThreads>>>(x, n, partials);
  check_launch("partial_squares_kernel");
  total_kernel<<<1, kSumBlocks>>>(partials, blocks, total);
  check_launch("total_kernel");
}

void sums_of_squares(const std::vector<std::pair<const float*, int64_t>>& xs, double* out) {
  if (xs.empty()) return;
  const std::vector<void*> pieces = scratch({kSumBlocks * sizeof(double), xs.size() * sizeof(double)});
  auto* partials = static_cast<double*>(pieces[0]);  // reused: the kernels run one after another
  auto* totals = static_cast<double*>(pieces[1]);
  for (size_t i = 0; i < xs.size(); ++i) sum_of_squares_to_device(xs[i].first, xs[i].second, partials, totals + i);
  check_cuda(cudaMemcpy(out, totals, xs.size() * sizeof(double), cudaMemcpyDeviceToHost),
             "sums_of_squares: cudaMemcpy");
}

}  // namespace linea::cuda
