// The log forget gate of the gated-linear-attention family, elementwise over logits x, g: [N, C]
// with an optional lower bound lb: [C] (0 without one):
//   g = log(lb + (1 − lb) σ(x)) / normalizer = log_add_exp(log(1 − lb) + log σ(x), log lb) / normalizer
//   dx = dg / normalizer · exp(log(1 − lb) + log σ(x) − g·normalizer) · σ(−x)      (overwritten)
// in log space (log σ(x) = −softplus(−x)), as kernels/cpu/forget_gates.cpp. The lower bound's
// gradient has no CUDA kernel yet (kernels/forget_gates.cpp refuses it).
#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/ops.h"

namespace linea::cuda {

namespace {

struct Gate {
  float value, d_logit;
};

__device__ __forceinline__ Gate forget_gate(float x, float lb) {
  const float through_sigmoid = log1pf(-lb) - softplus(-x);
  if (!(lb > 0.0f)) return {through_sigmoid, sigmoid(-x)};
  const float log_lb = logf(lb);
  const float gl = fmaxf(through_sigmoid, log_lb) + log1pf(expf(-fabsf(through_sigmoid - log_lb)));
  return {gl, expf(through_sigmoid - gl) * sigmoid(-x)};
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

}  // namespace

void log_forget_gate_forward(Tensor g, const Tensor& logits, const Tensor& lower_bound, double normalizer) {
  dispatch_float(logits.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const GateParameters<T> p{lower_bound.defined() ? data_of<T>(lower_bound) : nullptr, logits.dim(1),
                              static_cast<float>(normalizer)};
    map_elements<T, 1, 1>(logits.numel(), {data_of<T>(logits)}, {data_of<T>(g)}, GateForward<T>{p});
  });
}

void log_forget_gate_backward(Tensor dlogits, const Tensor& dg, const Tensor& logits, const Tensor& lower_bound,
                              double normalizer) {
  dispatch_float(logits.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const GateParameters<T> p{lower_bound.defined() ? data_of<T>(lower_bound) : nullptr, logits.dim(1),
                              static_cast<float>(normalizer)};
    map_elements<T, 2, 1>(logits.numel(), {data_of<T>(dg), data_of<T>(logits)}, {data_of<T>(dlogits)},
                          GateBackward<T>{p});
  });
}

}  // namespace linea::cuda
