// Linear layer through cuBLASLt (kernels/cuda/gemm.h), x: [N, I], W: [O, I]:
//   out = x · Wᵀ + b               (bias fused as the GEMM's epilogue)
//   dx = dout · W  (+ dx when accumulating),   dW += doutᵀ · x    (GEMMs, f32 accumulation)
//   db += Σ_n dout[n, :]           (deterministic column sums)
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/scratch.h"

namespace linea::cuda {

namespace {
template <class T>
struct RowEntry {  // f(n, o) = dout[n, o]
  const T* dout;
  int64_t width;
  __device__ float operator()(int64_t n, int64_t o) const { return to_float(dout[n * width + o]); }
};
}  // namespace

void linear_forward(Tensor out, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const int64_t n = x.dim(0), in = x.dim(1), o = weight.dim(0);
  const GemmOperands types{x.dtype(), x.dtype()};
  gemm(false, true, n, o, in, 1.0f, x.raw(), in, weight.raw(), in, 0.0f, out.raw(), o, types,
       bias.defined() ? bias.raw() : nullptr);
}

void linear_backward(Tensor dx, Tensor dweight, Tensor dbias, const Tensor& dout, const Tensor& x, const Tensor& weight,
                     bool accumulate_dx) {
  const int64_t n = x.dim(0), in = x.dim(1), o = weight.dim(0);
  const GemmOperands types{x.dtype(), x.dtype()};
  if (dx.defined()) {
    gemm(false, false, n, in, o, 1.0f, dout.raw(), o, weight.raw(), in, accumulate_dx ? 1.0f : 0.0f, dx.raw(), in,
         types);
  }
  if (dweight.defined()) gemm(true, false, o, in, n, 1.0f, dout.raw(), o, x.raw(), in, 1.0f, dweight.raw(), in, types);
  if (dbias.defined()) {
    dispatch_float(dout.dtype(), [&](auto zero) {
      using T = decltype(zero);
      float* partials = static_cast<float*>(scratch({column_sum_partials_bytes(n, o)})[0]);
      add_column_sums(data_of<T>(dbias), partials, n, o, RowEntry<T>{data_of<T>(dout), o});
    });
  }
}

}  // namespace linea::cuda
