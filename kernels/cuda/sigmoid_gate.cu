// Sigmoid gate, elementwise: β = scale · σ(logits).
// Backward through the saved β: dlogits = dβ · β · (1 − β / scale)   (= dβ · scale · σ · (1 − σ)).
#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/ops.h"

namespace linea::cuda {

namespace {
struct SigmoidGateForward {  // in: logits
  float scale;
  __device__ void operator()(int64_t, const float (&in)[1], float (&out)[1]) const { out[0] = scale * sigmoid(in[0]); }
};
struct SigmoidGateBackward {  // in: dβ, β
  float scale;
  __device__ void operator()(int64_t, const float (&in)[2], float (&out)[1]) const {
    out[0] = in[0] * in[1] * (1.0f - in[1] / scale);
  }
};
}  // namespace

void sigmoid_gate_forward(Tensor beta, const Tensor& logits, double scale) {
  dispatch_float(logits.dtype(), [&](auto zero) {
    using T = decltype(zero);
    map_elements<T, 1, 1>(logits.numel(), {data_of<T>(logits)}, {data_of<T>(beta)},
                          SigmoidGateForward{static_cast<float>(scale)});
  });
}

void sigmoid_gate_backward(Tensor dlogits, const Tensor& dbeta, const Tensor& beta, double scale) {
  dispatch_float(beta.dtype(), [&](auto zero) {
    using T = decltype(zero);
    map_elements<T, 2, 1>(beta.numel(), {data_of<T>(dbeta), data_of<T>(beta)}, {data_of<T>(dlogits)},
                          SigmoidGateBackward{static_cast<float>(scale)});
  });
}

}  // namespace linea::cuda
