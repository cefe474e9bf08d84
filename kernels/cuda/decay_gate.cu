// Mamba-style log decay, elementwise over a, g: [N, H·c] (c decays per head):
//   g[n, k] = −exp(A_log[h]) · softplus(a[n, k] + dt_bias[k]),   h = k / c
// Backward (softplus' = σ):
//   da[n, k] = dg[n, k] · (−exp(A_log[h]) · σ(a[n, k] + dt_bias[k]))         (overwritten)
//   ddt_bias[k] += Σ_n da[n, k];   dA_log[h] += Σ_{k of head h} (Σ_n dg[n, k] · g[n, k])
// The sums run first (deterministic column sums; the inner sums of dA_log per channel, in f32, then
// one thread per head adds its channels in order) because da may alias dg.
#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/scratch.h"

namespace linea::cuda {

namespace {
template <class T>
struct DecayParameters {
  const T* A_log;
  const T* dt_bias;
  int64_t width, per_head;
  __device__ float rate(int64_t k) const { return expf(to_float(A_log[k / per_head])); }
  __device__ float shifted(float a, int64_t k) const { return a + to_float(dt_bias[k]); }
};

template <class T>
struct DecayForward {  // in: a
  DecayParameters<T> p;
  __device__ void operator()(int64_t i, const float (&in)[1], float (&out)[1]) const {
    const int64_t k = i % p.width;
    out[0] = -p.rate(k) * softplus(p.shifted(in[0], k));
  }
};

template <class T>
struct DecayInputGradient {  // in: dg, a
  DecayParameters<T> p;
  __device__ void operator()(int64_t i, const float (&in)[2], float (&out)[1]) const {
    const int64_t k = i % p.width;
    out[0] = in[0] * (-p.rate(k) * sigmoid(p.shifted(in[1], k)));
  }
};

// f(n, k) = da[n, k]
template <class T>
struct DtBiasTerm {
  DecayParameters<T> p;
  const T *dg, *a;
  __device__ float operator()(int64_t n, int64_t k) const {
    const int64_t i = n * p.width + k;
    return to_float(dg[i]) * (-p.rate(k) * sigmoid(p.shifted(to_float(a[i]), k)));
  }
};

// f(n, k) = dg[n, k] · g[n, k]
template <class T>
struct ALogTerm {
  DecayParameters<T> p;
  const T *dg, *a;
  __device__ float operator()(int64_t n, int64_t k) const {
    const int64_t i = n * p.width + k;
    return to_float(dg[i]) * (-p.rate(k) * softplus(p.shifted(to_float(a[i]), k)));
  }
};

}  // namespace

void decay_gate_forward(Tensor g, const Tensor& a, const Tensor& A_log, const Tensor& dt_bias) {
  dispatch_float(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const int64_t width = a.dim(1);
    const DecayParameters<T> p{data_of<T>(A_log), data_of<T>(dt_bias), width, width / A_log.dim(0)};
    map_elements<T, 1, 1>(a.numel(), {data_of<T>(a)}, {data_of<T>(g)}, DecayForward<T>{p});
  });
}

void decay_gate_backward(Tensor da, Tensor dA_log, Tensor ddt_bias, const Tensor& dg, const Tensor& a,
                         const Tensor& A_log, const Tensor& dt_bias) {
  dispatch_float(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const int64_t rows = a.dim(0), width = a.dim(1), heads = A_log.dim(0);
    const DecayParameters<T> p{data_of<T>(A_log), data_of<T>(dt_bias), width, width / heads};
    const std::vector<void*> pieces =
        scratch({static_cast<size_t>(width) * sizeof(float), column_sum_partials_bytes(rows, width)});
    float* channel_sums = static_cast<float*>(pieces[0]);
    float* partials = static_cast<float*>(pieces[1]);
    check_cuda(cudaMemsetAsync(channel_sums, 0, static_cast<size_t>(width) * sizeof(float)), "cudaMemsetAsync");
    add_column_sums(channel_sums, partials, rows, width, ALogTerm<T>{p, data_of<T>(dg), data_of<T>(a)});
    add_group_sums(data_of<T>(dA_log), channel_sums, heads, width / heads);
    add_column_sums(data_of<T>(ddt_bias), partials, rows, width, DtBiasTerm<T>{p, data_of<T>(dg), data_of<T>(a)});
    map_elements<T, 2, 1>(a.numel(), {data_of<T>(dg), data_of<T>(a)}, {data_of<T>(da)}, DecayInputGradient<T>{p});
  });
}

}  // namespace linea::cuda
