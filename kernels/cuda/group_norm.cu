// GroupNorm over G groups of P = C/G channels of each row (kernels/ops.h; the math of
// kernels/cpu/group_norm.cpp), f32 arithmetic, mean and rstd f32. For a group x of row n:
//   μ = Σ_p x_p / P,  r = 1 / sqrt(Σ_p (x_p − μ)² / P + eps),  x̂ = (x − μ) r,  y_c = x̂_c w_c + b_c
// Backward, dn_c = dout_c · w_c:
//   dx_c = r · (dn_c − mean_p(dn) − x̂_c · mean_p(dn ⊙ x̂))                              (overwritten)
//   dw_c += Σ_n dout_c x̂_c,  db_c += Σ_n dout_c       (deterministic column sums, formed first)
// One warp per (row, group): lanes stride over the group's channels, the sums are warp reductions.
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/warp_reduce.cuh"

namespace linea::cuda {

namespace {
struct GroupShape {
  int64_t rows, width, groups;
};

template <class T>
__global__ void forward_kernel(T* out, float* mean, float* rstd, const T* x, const T* weight, const T* bias,
                               GroupShape s, float eps) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / kWarpSize, P = s.width / s.groups;
  for (int64_t q = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / kWarpSize; q < s.rows * s.groups; q += warps) {
    const int64_t base = q * P, first_channel = (q % s.groups) * P;
    float sum = 0.0f;
    for (int64_t p = lane; p < P; p += kWarpSize) sum += to_float(x[base + p]);
    const float mu = warp_sum(sum) / static_cast<float>(P);
    float squares = 0.0f;
    for (int64_t p = lane; p < P; p += kWarpSize) {
      const float d = to_float(x[base + p]) - mu;
      squares += d * d;
    }
    const float r = 1.0f / sqrtf(warp_sum(squares) / static_cast<float>(P) + eps);
    if (lane == 0) {
      mean[q] = mu;
      rstd[q] = r;
    }
    for (int64_t p = lane; p < P; p += kWarpSize) {
      const int64_t c = first_channel + p;
      out[base + p] = from_float<T>((to_float(x[base + p]) - mu) * r * to_float(weight[c]) + to_float(bias[c]));
    }
  }
}

template <class T>
__global__ void input_gradient_kernel(T* dx, const T* dout, const T* x, const T* weight, const float* mean,
                                      const float* rstd, GroupShape s) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / kWarpSize, P = s.width / s.groups;
  for (int64_t q = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / kWarpSize; q < s.rows * s.groups; q += warps) {
    const int64_t base = q * P, first_channel = (q % s.groups) * P;
    const float mu = mean[q], r = rstd[q];
    float sum_dn = 0.0f, sum_dn_n = 0.0f;
    for (int64_t p = lane; p < P; p += kWarpSize) {
      const float dn = to_float(dout[base + p]) * to_float(weight[first_channel + p]);
      sum_dn += dn;
      sum_dn_n += dn * (to_float(x[base + p]) - mu) * r;
    }
    const float mean_dn = warp_sum(sum_dn) / static_cast<float>(P);
    const float mean_dn_n = warp_sum(sum_dn_n) / static_cast<float>(P);
    for (int64_t p = lane; p < P; p += kWarpSize) {
      const float dn = to_float(dout[base + p]) * to_float(weight[first_channel + p]);
      const float normed = (to_float(x[base + p]) - mu) * r;
      dx[base + p] = from_float<T>(r * (dn - mean_dn - normed * mean_dn_n));
    }
  }
}

// f(n, c) = dout · x̂ (weight) or dout (bias)
template <class T, bool kNormed>
struct ParameterTerm {
  const T *dout, *x;
  const float *mean, *rstd;
  GroupShape s;
  __device__ float operator()(int64_t n, int64_t c) const {
    const int64_t i = n * s.width + c;
    if (!kNormed) return to_float(dout[i]);
    const int64_t q = n * s.groups + c / (s.width / s.groups);
    return to_float(dout[i]) * (to_float(x[i]) - mean[q]) * rstd[q];
  }
};

int warp_blocks(int64_t groups) { return grid_stride_blocks(groups * kWarpSize); }
}  // namespace

void group_norm_forward(Tensor out, Tensor mean, Tensor rstd, const Tensor& x, const Tensor& weight, const Tensor& bias,
                        int64_t groups, double eps) {
  const GroupShape s{x.dim(0), x.dim(1), groups};
  if (s.rows == 0 || s.width == 0) return;
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    forward_kernel<T><<<warp_blocks(s.rows * s.groups), kThreadsPerBlock>>>(
        data_of<T>(out), data_of<float>(mean), data_of<float>(rstd), data_of<T>(x), data_of<T>(weight),
        data_of<T>(bias), s, static_cast<float>(eps));
    check_launch("group_norm forward_kernel");
  });
}

void group_norm_backward(Tensor dx, Tensor dweight, Tensor dbias, const Tensor& dout, const Tensor& x,
                         const Tensor& weight, const Tensor& mean, const Tensor& rstd, int64_t groups) {
  const GroupShape s{x.dim(0), x.dim(1), groups};
  if (s.rows == 0 || s.width == 0) return;
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    float* partials = static_cast<float*>(scratch({column_sum_partials_bytes(s.rows, s.width)})[0]);
    const T *d = data_of<T>(dout), *xs = data_of<T>(x);
    const float *m = data_of<float>(mean), *r = data_of<float>(rstd);
    add_column_sums(data_of<T>(dweight), partials, s.rows, s.width, ParameterTerm<T, true>{d, xs, m, r, s});
    add_column_sums(data_of<T>(dbias), partials, s.rows, s.width, ParameterTerm<T, false>{d, xs, m, r, s});
    input_gradient_kernel<T>
        <<<warp_blocks(s.rows * s.groups), kThreadsPerBlock>>>(data_of<T>(dx), d, xs, data_of<T>(weight), m, r, s);
    check_launch("group_norm input_gradient_kernel");
  });
}

}  // namespace linea::cuda
