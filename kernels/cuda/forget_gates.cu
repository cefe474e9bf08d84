// The gates of the gated-linear-attention family and HGRN (kernels/ops.h), in f32 arithmetic, as
// kernels/cpu/forget_gates.cpp. Elementwise over [N, C] (per-column parameters indexed by i mod C)
// unless stated; parameter gradients are deterministic column sums (kernels/cuda/column_sums.cuh),
// formed before any overwritten gradient is written (those may alias dg).
//
// Log forget gate, logits x, lower bound lb: [C] (0 without one), ν the normalizer:
//   g = log(lb + (1 − lb) σ(x)) / ν = log_add_exp(log(1 − lb) + log σ(x), log lb) / ν
//   dx = dg / ν · exp(log(1 − lb) + log σ(x) − g·ν) · σ(−x)                  (overwritten)
//   dlb[c] += Σ_n dg / ν · exp(log σ(−x) − g·ν)      (∂/∂lb of log(lb + (1 − lb)σ) = (1 − σ) / e^{g·ν})
// in log space (log σ(x) = −softplus(−x)).
// Forget input:  out = silu(i) · (1 − e^g);  dg = −dout · silu(i) · e^g,  di = dout · (1 − e^g) · silu'(i)
// Exp decay:     g = −e^w;  dw = dg · g
// SSD gate, dt, g, Δ: [N, H], per head h:  Δ = softplus(dt + b_h),  g = −e^{A_h} Δ
//   ddt = (dΔ − e^{A_h} dg) · σ(dt + b_h),  dA_h += Σ_n dg · g,  db_h += Σ_n ddt
// Layer lower bound, Γ: [L, C], one thread per channel c:  p = softmax_m Γ[m, c],  lb_ℓ = Σ_{1≤m≤ℓ} p_m
//   dΓ[j, c] += p_j · (dlb · [1 ≤ j ≤ ℓ] − dlb · lb_ℓ)     (Σ_m p_m dp_m = dlb · lb_ℓ)
#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/scratch.h"

namespace linea::cuda {

namespace {

struct Gate {
  float value, d_logit, d_lower_bound;
};

__device__ __forceinline__ Gate forget_gate(float x, float lb) {
  const float through_sigmoid = log1pf(-lb) - softplus(-x);
  float gl = through_sigmoid;
  if (lb > 0.0f) {
    const float log_lb = logf(lb);
    gl = fmaxf(through_sigmoid, log_lb) + log1pf(expf(-fabsf(through_sigmoid - log_lb)));
  }
  return {gl, expf(through_sigmoid - gl) * sigmoid(-x), expf(-softplus(x) - gl)};
}

template <class T>
struct GateParameters {
  const T* lower_bound;  // null: 0
  int64_t width;
  float normalizer;
  __device__ float bound(int64_t i) const { return lower_bound ? to_float(lower_bound[i % width]) : 0.0f; }
};

template <class T>
struct GateForward {  // in: x
  GateParameters<T> p;
  __device__ void operator()(int64_t i, const float (&in)[1], float (&out)[1]) const {
    out[0] = forget_gate(in[0], p.bound(i)).value / p.normalizer;
  }
};

template <class T>
struct GateBackward {  // in: dg, x
  GateParameters<T> p;
  __device__ void operator()(int64_t i, const float (&in)[2], float (&out)[1]) const {
    out[0] = in[0] / p.normalizer * forget_gate(in[1], p.bound(i)).d_logit;
  }
};

// f(n, c) = dg[n, c] / ν · ∂g/∂lb[c]
template <class T>
struct LowerBoundTerm {
  GateParameters<T> p;
  const T *dg, *x;
  __device__ float operator()(int64_t n, int64_t c) const {
    const int64_t i = n * p.width + c;
    return to_float(dg[i]) / p.normalizer * forget_gate(to_float(x[i]), p.bound(c)).d_lower_bound;
  }
};

struct ForgetInputForward {  // in: i, g
  __device__ void operator()(int64_t, const float (&in)[2], float (&out)[1]) const {
    out[0] = silu(in[0]) * -expm1f(in[1]);
  }
};

struct ForgetInputBackward {  // in: dout, i, g; out: di, dg
  __device__ void operator()(int64_t, const float (&in)[3], float (&out)[2]) const {
    const float d = in[0], i = in[1], g = in[2];
    out[0] = d * -expm1f(g) * silu_grad(i);
    out[1] = -d * silu(i) * expf(g);
  }
};

struct ExpDecayForward {  // in: w
  __device__ void operator()(int64_t, const float (&in)[1], float (&out)[1]) const { out[0] = -expf(in[0]); }
};

struct ExpDecayBackward {  // in: dg, g
  __device__ void operator()(int64_t, const float (&in)[2], float (&out)[1]) const { out[0] = in[0] * in[1]; }
};

template <class T>
struct SsdParameters {
  const T *A_log, *dt_bias;
  int64_t heads;
  __device__ float rate(int64_t h) const { return expf(to_float(A_log[h])); }
  __device__ float shifted(float dt, int64_t h) const { return dt + to_float(dt_bias[h]); }
};

template <class T>
struct SsdForward {  // in: dt; out: g, Δ
  SsdParameters<T> p;
  __device__ void operator()(int64_t i, const float (&in)[1], float (&out)[2]) const {
    const int64_t h = i % p.heads;
    const float delta = softplus(p.shifted(in[0], h));
    out[0] = -p.rate(h) * delta;
    out[1] = delta;
  }
};

template <class T>
struct SsdInputGradient {  // in: dg, dΔ, dt; out: ddt
  SsdParameters<T> p;
  __device__ void operator()(int64_t i, const float (&in)[3], float (&out)[1]) const {
    const int64_t h = i % p.heads;
    out[0] = (in[1] - p.rate(h) * in[0]) * sigmoid(p.shifted(in[2], h));
  }
};

// f(n, h) = dg · g
template <class T>
struct SsdALogTerm {
  SsdParameters<T> p;
  const T *dg, *dt;
  __device__ float operator()(int64_t n, int64_t h) const {
    const int64_t i = n * p.heads + h;
    return to_float(dg[i]) * (-p.rate(h) * softplus(p.shifted(to_float(dt[i]), h)));
  }
};

// f(n, h) = ddt
template <class T>
struct SsdBiasTerm {
  SsdParameters<T> p;
  const T *dg, *ddelta, *dt;
  __device__ float operator()(int64_t n, int64_t h) const {
    const int64_t i = n * p.heads + h;
    return (to_float(ddelta[i]) - p.rate(h) * to_float(dg[i])) * sigmoid(p.shifted(to_float(dt[i]), h));
  }
};

struct LayerShape {
  int64_t layers, width, layer;
};

// The softmax over layers of channel c of Γ: its maximum and the sum of exp(Γ − max).
template <class T>
__device__ __forceinline__ float2 layer_softmax_scale(const T* gamma, LayerShape s, int64_t c) {
  float top = to_float(gamma[c]);
  for (int64_t m = 1; m < s.layers; ++m) top = fmaxf(top, to_float(gamma[m * s.width + c]));
  float sum = 0.0f;
  for (int64_t m = 0; m < s.layers; ++m) sum += expf(to_float(gamma[m * s.width + c]) - top);
  return make_float2(top, sum);
}

template <class T>
__device__ __forceinline__ float bound_of_layer(const T* gamma, LayerShape s, int64_t c, float2 scale) {
  float lb = 0.0f;
  for (int64_t m = 1; m <= s.layer; ++m) lb += expf(to_float(gamma[m * s.width + c]) - scale.x) / scale.y;
  return lb;
}

template <class T>
__global__ void lower_bound_forward_kernel(T* lower_bound, const T* gamma, LayerShape s) {
  const int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (c >= s.width) return;
  lower_bound[c] = from_float<T>(bound_of_layer(gamma, s, c, layer_softmax_scale(gamma, s, c)));
}

template <class T>
__global__ void lower_bound_backward_kernel(T* dgamma, const T* dlower_bound, const T* gamma, LayerShape s) {
  const int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (c >= s.width) return;
  const float2 scale = layer_softmax_scale(gamma, s, c);
  const float dlb = to_float(dlower_bound[c]), weighted = dlb * bound_of_layer(gamma, s, c, scale);
  for (int64_t j = 0; j < s.layers; ++j) {
    const float p = expf(to_float(gamma[j * s.width + c]) - scale.x) / scale.y;
    const float dp = j >= 1 && j <= s.layer ? dlb : 0.0f;
    T& cell = dgamma[j * s.width + c];
    cell = from_float<T>(to_float(cell) + p * (dp - weighted));
  }
}

unsigned channel_blocks(int64_t width) { return static_cast<unsigned>(ceil_div(width, kThreadsPerBlock)); }

}  // namespace

void log_forget_gate_forward(Tensor g, const Tensor& logits, const Tensor& lower_bound, double normalizer) {
  dispatch_float(logits.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const GateParameters<T> p{lower_bound.defined() ? data_of<T>(lower_bound) : nullptr, logits.dim(1),
                              static_cast<float>(normalizer)};
    map_elements<T, 1, 1>(logits.numel(), {data_of<T>(logits)}, {data_of<T>(g)}, GateForward<T>{p});
  });
}

void log_forget_gate_backward(Tensor dlogits, Tensor dlower_bound, const Tensor& dg, const Tensor& logits,
                              const Tensor& lower_bound, double normalizer) {
  dispatch_float(logits.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const int64_t rows = logits.dim(0), width = logits.dim(1);
    const GateParameters<T> p{lower_bound.defined() ? data_of<T>(lower_bound) : nullptr, width,
                              static_cast<float>(normalizer)};
    if (dlower_bound.defined()) {
      float* partials = static_cast<float*>(scratch({column_sum_partials_bytes(rows, width)})[0]);
      add_column_sums(data_of<T>(dlower_bound), partials, rows, width,
                      LowerBoundTerm<T>{p, data_of<T>(dg), data_of<T>(logits)});
    }
    map_elements<T, 2, 1>(logits.numel(), {data_of<T>(dg), data_of<T>(logits)}, {data_of<T>(dlogits)},
                          GateBackward<T>{p});
  });
}

void forget_input_forward(Tensor out, const Tensor& i, const Tensor& g) {
  dispatch_float(i.dtype(), [&](auto zero) {
    using T = decltype(zero);
    map_elements<T, 2, 1>(i.numel(), {data_of<T>(i), data_of<T>(g)}, {data_of<T>(out)}, ForgetInputForward{});
  });
}

void forget_input_backward(Tensor di, Tensor dg, const Tensor& dout, const Tensor& i, const Tensor& g) {
  dispatch_float(i.dtype(), [&](auto zero) {
    using T = decltype(zero);
    map_elements<T, 3, 2>(i.numel(), {data_of<T>(dout), data_of<T>(i), data_of<T>(g)}, {data_of<T>(di), data_of<T>(dg)},
                          ForgetInputBackward{});
  });
}

void exp_decay_forward(Tensor g, const Tensor& w) {
  dispatch_float(w.dtype(), [&](auto zero) {
    using T = decltype(zero);
    map_elements<T, 1, 1>(w.numel(), {data_of<T>(w)}, {data_of<T>(g)}, ExpDecayForward{});
  });
}

void exp_decay_backward(Tensor dw, const Tensor& dg, const Tensor& g) {
  dispatch_float(g.dtype(), [&](auto zero) {
    using T = decltype(zero);
    map_elements<T, 2, 1>(g.numel(), {data_of<T>(dg), data_of<T>(g)}, {data_of<T>(dw)}, ExpDecayBackward{});
  });
}

void ssd_gate_forward(Tensor g, Tensor delta, const Tensor& dt, const Tensor& A_log, const Tensor& dt_bias) {
  dispatch_float(dt.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const SsdParameters<T> p{data_of<T>(A_log), data_of<T>(dt_bias), dt.dim(1)};
    map_elements<T, 1, 2>(dt.numel(), {data_of<T>(dt)}, {data_of<T>(g), data_of<T>(delta)}, SsdForward<T>{p});
  });
}

void ssd_gate_backward(Tensor ddt, Tensor dA_log, Tensor ddt_bias, const Tensor& dg, const Tensor& ddelta,
                       const Tensor& dt, const Tensor& A_log, const Tensor& dt_bias) {
  dispatch_float(dt.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const int64_t rows = dt.dim(0), heads = dt.dim(1);
    const SsdParameters<T> p{data_of<T>(A_log), data_of<T>(dt_bias), heads};
    float* partials = static_cast<float*>(scratch({column_sum_partials_bytes(rows, heads)})[0]);
    add_column_sums(data_of<T>(dA_log), partials, rows, heads, SsdALogTerm<T>{p, data_of<T>(dg), data_of<T>(dt)});
    add_column_sums(data_of<T>(ddt_bias), partials, rows, heads,
                    SsdBiasTerm<T>{p, data_of<T>(dg), data_of<T>(ddelta), data_of<T>(dt)});
    map_elements<T, 3, 1>(dt.numel(), {data_of<T>(dg), data_of<T>(ddelta), data_of<T>(dt)}, {data_of<T>(ddt)},
                          SsdInputGradient<T>{p});
  });
}

void layer_lower_bound_forward(Tensor lower_bound, const Tensor& gamma, int64_t layer) {
  const LayerShape s{gamma.dim(0), gamma.dim(1), layer};
  if (s.width == 0) return;
  dispatch_float(gamma.dtype(), [&](auto zero) {
    using T = decltype(zero);
    lower_bound_forward_kernel<T>
        <<<channel_blocks(s.width), kThreadsPerBlock>>>(data_of<T>(lower_bound), data_of<T>(gamma), s);
    check_launch("lower_bound_forward_kernel");
  });
}

void layer_lower_bound_backward(Tensor dgamma, const Tensor& dlower_bound, const Tensor& gamma, int64_t layer) {
  const LayerShape s{gamma.dim(0), gamma.dim(1), layer};
  if (s.width == 0) return;
  dispatch_float(gamma.dtype(), [&](auto zero) {
    using T = decltype(zero);
    lower_bound_backward_kernel<T><<<channel_blocks(s.width), kThreadsPerBlock>>>(
        data_of<T>(dgamma), data_of<T>(dlower_bound), data_of<T>(gamma), s);
    check_launch("lower_bound_backward_kernel");
  });
}

}  // namespace linea::cuda
