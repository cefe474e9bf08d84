// Element-wise activations (kernels/ops.h), f32 arithmetic:
//   silu:  out = x · σ(x),  dx = dout · σ(x) (1 + x (1 − σ(x)))     (saved = x)
//   tanh:  out = tanh(x),   dx = dout · (1 − out²)                  (saved = out)
#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/ops.h"

namespace linea::cuda {

namespace {
struct ActivationForward {  // in: x
  ops::Activation act;
  __device__ void operator()(int64_t, const float (&in)[1], float (&out)[1]) const {
    out[0] = act == ops::Activation::silu ? silu(in[0]) : tanhf(in[0]);
  }
};

struct ActivationBackward {  // in: dout, saved
  ops::Activation act;
  __device__ void operator()(int64_t, const float (&in)[2], float (&out)[1]) const {
    out[0] = in[0] * (act == ops::Activation::silu ? silu_grad(in[1]) : 1.0f - in[1] * in[1]);
  }
};
}  // namespace

void activation_forward(Tensor out, const Tensor& x, ops::Activation act) {
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    map_elements<T, 1, 1>(x.numel(), {data_of<T>(x)}, {data_of<T>(out)}, ActivationForward{act});
  });
}

void activation_backward(Tensor dx, const Tensor& dout, const Tensor& saved, ops::Activation act) {
  dispatch_float(saved.dtype(), [&](auto zero) {
    using T = decltype(zero);
    map_elements<T, 2, 1>(saved.numel(), {data_of<T>(dout), data_of<T>(saved)}, {data_of<T>(dx)},
                          ActivationBackward{act});
  });
}

}  // namespace linea::cuda
