// SwiGLU, elementwise: out = silu(gate) · up.
// Backward: dgate = dout · up · silu'(gate), dup = dout · silu(gate) (both overwritten; dgate may
// alias gate), and with swiglu_backward_with_product also out = silu(gate) · up in the same pass.
#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/ops.h"

namespace linea::cuda {

namespace {
struct SwigluForward {  // in: gate, up
  __device__ void operator()(int64_t, const float (&in)[2], float (&out)[1]) const { out[0] = silu(in[0]) * in[1]; }
};
template <int kOut>  // in: dout, gate, up; out: dgate, dup (and the product when kOut = 3)
struct SwigluBackward {
  __device__ void operator()(int64_t, const float (&in)[3], float (&out)[kOut]) const {
    const float s = silu(in[1]);
    out[0] = in[0] * in[2] * silu_grad(in[1]);
    out[1] = in[0] * s;
    if constexpr (kOut == 3) out[2] = s * in[2];
  }
};
}  // namespace

void swiglu_forward(Tensor out, const Tensor& gate, const Tensor& up) {
  dispatch_float(gate.dtype(), [&](auto zero) {
    using T = decltype(zero);
    map_elements<T, 2, 1>(gate.numel(), {data_of<T>(gate), data_of<T>(up)}, {data_of<T>(out)}, SwigluForward{});
  });
}

void swiglu_backward(Tensor dgate, Tensor dup, const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor out) {
  dispatch_float(gate.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const std::array<const T*, 3> in{data_of<T>(dout), data_of<T>(gate), data_of<T>(up)};
    if (out.defined()) {
      map_elements<T, 3, 3>(gate.numel(), in, {data_of<T>(dgate), data_of<T>(dup), data_of<T>(out)},
                            SwigluBackward<3>{});
    } else {
      map_elements<T, 3, 2>(gate.numel(), in, {data_of<T>(dgate), data_of<T>(dup)}, SwigluBackward<2>{});
    }
  });
}

}  // namespace linea::cuda
