// Short causal depthwise convolution + SiLU, never reading across sequences (the math of
// kernels/cpu/short_conv.h). x, out: [N, C]; weight: [C, W]; b(t), e(t): the first token and one
// past the last token of t's sequence; x[s, c] = 0 for s < b(t):
//   pre[t, c] = Σ_{i<W} weight[c, i] · x[t − (W−1) + i, c],   out = silu(pre)
// Backward, pre recomputed wherever it is needed (W is small), dpre = dout · silu'(pre):
//   dx[s, c] = Σ_{i<W, s+(W−1)−i < e(s)} weight[c, i] · dpre[s + (W−1) − i, c]      (overwritten)
//   dweight[c, i] += Σ_{t, t−(W−1)+i ≥ b(t)} dpre[t, c] · x[t − (W−1) + i, c]       (column sums)
// The sequence bounds of every token come from one pass over the uploaded cu_seqlens.
#include <vector>

#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/scratch.h"

namespace linea::cuda {

namespace {
// begin[t], end[t] of t's sequence: the last s with cu_seqlens[s] ≤ t (binary search).
__global__ void token_bounds_kernel(int64_t* begin, int64_t* end, const int64_t* cu_seqlens, int64_t seqs,
                                    int64_t tokens) {
  for (int64_t t = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < tokens; t += int64_t{gridDim.x} * blockDim.x) {
    int64_t lo = 0, hi = seqs;  // cu_seqlens[lo] ≤ t < cu_seqlens[hi]
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      if (cu_seqlens[mid] <= t) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    begin[t] = cu_seqlens[lo];
    end[t] = cu_seqlens[lo + 1];
  }
}

template <class T>
struct Conv {
  const T *x, *weight;
  const int64_t *begin, *end;
  int64_t channels, width;

  __device__ float pre(int64_t t, int64_t c) const {
    float sum = 0.0f;
    for (int64_t i = 0; i < width; ++i) {
      const int64_t src = t - (width - 1) + i;
      if (src >= begin[t]) sum += to_float(weight[c * width + i]) * to_float(x[src * channels + c]);
    }
    return sum;
  }
};

template <class T>
struct ConvForward {  // no inputs read through the map: pre comes from the convolution
  Conv<T> conv;
  __device__ void operator()(int64_t k, const float (&)[1], float (&out)[1]) const {
    out[0] = silu(conv.pre(k / conv.channels, k % conv.channels));
  }
};

template <class T>
struct ConvInputGradient {
  Conv<T> conv;
  const T* dout;
  __device__ void operator()(int64_t k, const float (&)[1], float (&out)[1]) const {
    const int64_t s = k / conv.channels, c = k % conv.channels, w = conv.width;
    float sum = 0.0f;
    for (int64_t i = 0; i < w; ++i) {
      const int64_t t = s + (w - 1) - i;
      if (t >= conv.end[s]) continue;
      const float dpre = to_float(dout[t * conv.channels + c]) * silu_grad(conv.pre(t, c));
      sum += to_float(conv.weight[c * w + i]) * dpre;
    }
    out[0] = sum;
  }
};

// f(t, c·W + i) = dpre[t, c] · x[t − (W−1) + i, c] (0 before t's sequence)
template <class T>
struct ConvWeightTerm {
  Conv<T> conv;
  const T* dout;
  __device__ float operator()(int64_t t, int64_t j) const {
    const int64_t c = j / conv.width, i = j % conv.width;
    const int64_t src = t - (conv.width - 1) + i;
    if (src < conv.begin[t]) return 0.0f;
    const float dpre = to_float(dout[t * conv.channels + c]) * silu_grad(conv.pre(t, c));
    return dpre * to_float(conv.x[src * conv.channels + c]);
  }
};

// Uploads cu_seqlens into `cu` and fills the per-token bounds.
void token_bounds(const SeqLayout& seqs, int64_t* cu, int64_t* begin, int64_t* end) {
  check_cuda(cudaMemcpy(cu, seqs.cu_seqlens.data(), seqs.cu_seqlens.size() * sizeof(int64_t), cudaMemcpyHostToDevice),
             "cudaMemcpy (cu_seqlens)");
  token_bounds_kernel<<<grid_stride_blocks(seqs.num_tokens()), kThreadsPerBlock>>>(begin, end, cu, seqs.num_seqs(),
                                                                                   seqs.num_tokens());
  check_launch("token_bounds_kernel");
}

size_t bounds_bytes(const SeqLayout& seqs) { return static_cast<size_t>(seqs.num_tokens()) * sizeof(int64_t); }
}  // namespace

void short_conv_silu_forward(Tensor out, const Tensor& x, const Tensor& weight, const SeqLayout& seqs) {
  if (x.numel() == 0) return;
  const std::vector<void*> pieces =
      scratch({seqs.cu_seqlens.size() * sizeof(int64_t), bounds_bytes(seqs), bounds_bytes(seqs)});
  int64_t* begin = static_cast<int64_t*>(pieces[1]);
  int64_t* end = static_cast<int64_t*>(pieces[2]);
  token_bounds(seqs, static_cast<int64_t*>(pieces[0]), begin, end);
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const Conv<T> conv{data_of<T>(x), data_of<T>(weight), begin, end, x.dim(1), weight.dim(1)};
    // The map's one input is x itself (read, unused), so that out is written in aligned packs.
    map_elements<T, 1, 1>(x.numel(), {data_of<T>(x)}, {data_of<T>(out)}, ConvForward<T>{conv});
  });
}

void short_conv_silu_backward(Tensor dx, Tensor dweight, const Tensor& dout, const Tensor& x, const Tensor& weight,
                              const SeqLayout& seqs) {
  if (x.numel() == 0) return;
  const int64_t channels = x.dim(1), width = weight.dim(1);
  const std::vector<void*> pieces =
      scratch({seqs.cu_seqlens.size() * sizeof(int64_t), bounds_bytes(seqs), bounds_bytes(seqs),
               column_sum_partials_bytes(x.dim(0), channels * width)});
  int64_t* begin = static_cast<int64_t*>(pieces[1]);
  int64_t* end = static_cast<int64_t*>(pieces[2]);
  token_bounds(seqs, static_cast<int64_t*>(pieces[0]), begin, end);
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const Conv<T> conv{data_of<T>(x), data_of<T>(weight), begin, end, channels, width};
    add_column_sums(data_of<T>(dweight), static_cast<float*>(pieces[3]), x.dim(0), channels * width,
                    ConvWeightTerm<T>{conv, data_of<T>(dout)});
    map_elements<T, 1, 1>(x.numel(), {data_of<T>(dout)}, {data_of<T>(dx)},
                          ConvInputGradient<T>{conv, data_of<T>(dout)});
  });
}

}  // namespace linea::cuda
