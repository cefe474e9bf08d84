// Short causal depthwise convolution + SiLU, never reading across sequences (the math of
// kernels/cpu/short_conv.h). x, out: [N, C]; weight: [C, W]; bias: [C] or none (0); b(t), e(t): the
// first token and one past the last token of t's sequence; x[s, c] = 0 for s < b(t):
//   pre[t, c] = Σ_{i<W} weight[c, i] · x[t − (W−1) + i, c] + bias[c],   out = silu(pre)
// Backward, as the CPU does it: dpre = dout · silu'(pre) (pre recomputed, dpre kept in f32), then
//   dx[s, c] = Σ_{i<W, s+(W−1)−i < e(s)} weight[c, i] · dpre[s + (W−1) − i, c]      (overwritten)
//   dweight[c, i] += Σ_{t, t−(W−1)+i ≥ b(t)} dpre[t, c] · x[t − (W−1) + i, c]       (column sums)
//   dbias[c] += Σ_t dpre[t, c]                                                       (column sums)
// Threads run along the channels of a token (coalesced), blocks along the tokens. The sequence
// bounds of every token come from kernels/cuda/token_bounds.h.
#include <algorithm>
#include <vector>

#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/token_bounds.h"

namespace linea::cuda {

namespace {
struct ConvShape {
  int64_t tokens, channels, width;
};

template <class T>
__device__ __forceinline__ float pre_activation(const T* x, const T* weight, const T* bias, int64_t t, int64_t c,
                                                int64_t begin, ConvShape s) {
  float sum = bias ? to_float(bias[c]) : 0.0f;
  for (int64_t i = 0; i < s.width; ++i) {
    const int64_t src = t - (s.width - 1) + i;
    if (src >= begin) sum += to_float(weight[c * s.width + i]) * to_float(x[src * s.channels + c]);
  }
  return sum;
}

// Grid: x over channels, y (grid-stride) over tokens.
template <class T>
__global__ void forward_kernel(T* out, const T* x, const T* weight, const T* bias, const int64_t* begin, ConvShape s) {
  const int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (c >= s.channels) return;
  for (int64_t t = blockIdx.y; t < s.tokens; t += gridDim.y) {
    out[t * s.channels + c] = from_float<T>(silu(pre_activation(x, weight, bias, t, c, begin[t], s)));
  }
}

template <class T>
__global__ void dpre_kernel(float* dpre, const T* dout, const T* x, const T* weight, const T* bias,
                            const int64_t* begin, ConvShape s) {
  const int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (c >= s.channels) return;
  for (int64_t t = blockIdx.y; t < s.tokens; t += gridDim.y) {
    const int64_t k = t * s.channels + c;
    dpre[k] = to_float(dout[k]) * silu_grad(pre_activation(x, weight, bias, t, c, begin[t], s));
  }
}

template <class T>
__global__ void input_gradient_kernel(T* dx, const float* dpre, const T* weight, const int64_t* end, ConvShape s) {
  const int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (c >= s.channels) return;
  for (int64_t src = blockIdx.y; src < s.tokens; src += gridDim.y) {
    float sum = 0.0f;
    for (int64_t i = 0; i < s.width; ++i) {
      const int64_t t = src + (s.width - 1) - i;
      if (t < end[src]) sum += to_float(weight[c * s.width + i]) * dpre[t * s.channels + c];
    }
    dx[src * s.channels + c] = from_float<T>(sum);
  }
}

// Column j = i · C + c (so that a warp reads 32 neighbouring channels of one token):
// f(t, j) = dpre[t, c] · x[t − (W−1) + i, c], 0 before t's sequence; its sum goes to dweight[c, i].
template <class T>
struct WeightTerm {
  const float* dpre;
  const T* x;
  const int64_t* begin;
  ConvShape s;
  __device__ float operator()(int64_t t, int64_t j) const {
    const int64_t i = j / s.channels, c = j % s.channels;
    const int64_t src = t - (s.width - 1) + i;
    return src < begin[t] ? 0.0f : dpre[t * s.channels + c] * to_float(x[src * s.channels + c]);
  }
};
struct WeightCell {
  ConvShape s;
  __device__ int64_t operator()(int64_t j) const { return (j % s.channels) * s.width + j / s.channels; }
};

// f(t, c) = dpre[t, c]; its sum goes to dbias[c].
struct BiasTerm {
  const float* dpre;
  ConvShape s;
  __device__ float operator()(int64_t t, int64_t c) const { return dpre[t * s.channels + c]; }
};

dim3 channel_token_grid(ConvShape s) {
  constexpr int64_t kMaxGridY = 65535;
  return dim3(static_cast<unsigned>(ceil_div(s.channels, kThreadsPerBlock)),
              static_cast<unsigned>(std::min(s.tokens, kMaxGridY)));
}

}  // namespace

void short_conv_silu_forward(Tensor out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                             const SeqLayout& seqs) {
  const ConvShape s{x.dim(0), x.dim(1), weight.dim(1)};
  if (s.tokens == 0 || s.channels == 0) return;
  const std::vector<void*> pieces = scratch_with_token_bounds(seqs, {});
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* b = bias.defined() ? data_of<T>(bias) : nullptr;
    forward_kernel<T><<<channel_token_grid(s), kThreadsPerBlock>>>(data_of<T>(out), data_of<T>(x), data_of<T>(weight),
                                                                   b, static_cast<const int64_t*>(pieces[1]), s);
    check_launch("short_conv forward_kernel");
  });
}

void short_conv_silu_backward(Tensor dx, Tensor dweight, Tensor dbias, const Tensor& dout, const Tensor& x,
                              const Tensor& weight, const Tensor& bias, const SeqLayout& seqs) {
  const ConvShape s{x.dim(0), x.dim(1), weight.dim(1)};
  if (s.tokens == 0 || s.channels == 0) return;
  const std::vector<void*> pieces =
      scratch_with_token_bounds(seqs, {static_cast<size_t>(s.tokens * s.channels) * sizeof(float),
                                       column_sum_partials_bytes(s.tokens, s.channels * s.width)});
  const int64_t* begin = static_cast<const int64_t*>(pieces[1]);
  const int64_t* end = static_cast<const int64_t*>(pieces[2]);
  float* dpre = static_cast<float*>(pieces[3]);
  float* partials = static_cast<float*>(pieces[4]);  // serves both column sums (W ≥ 1), one after the other
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* b = bias.defined() ? data_of<T>(bias) : nullptr;
    dpre_kernel<T><<<channel_token_grid(s), kThreadsPerBlock>>>(dpre, data_of<T>(dout), data_of<T>(x),
                                                                data_of<T>(weight), b, begin, s);
    check_launch("short_conv dpre_kernel");
    add_column_sums(data_of<T>(dweight), partials, s.tokens, s.channels * s.width,
                    WeightTerm<T>{dpre, data_of<T>(x), begin, s}, WeightCell{s});
    if (dbias.defined()) add_column_sums(data_of<T>(dbias), partials, s.tokens, s.channels, BiasTerm{dpre, s});
    input_gradient_kernel<T>
        <<<channel_token_grid(s), kThreadsPerBlock>>>(data_of<T>(dx), dpre, data_of<T>(weight), end, s);
    check_launch("short_conv input_gradient_kernel");
  });
}

}  // namespace linea::cuda
