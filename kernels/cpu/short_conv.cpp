#include "kernels/cpu/short_conv.h"

#include <vector>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/row_blocks.h"

namespace linea::cpu {

namespace {
// [begin, end) of the sequence holding each token.
struct TokenSequences {
  std::vector<int64_t> begin, end;
  explicit TokenSequences(const SeqLayout& seqs)
      : begin(static_cast<size_t>(seqs.num_tokens())), end(static_cast<size_t>(seqs.num_tokens())) {
    for (int64_t s = 0; s < seqs.num_seqs(); ++s) {
      for (int64_t t = seqs.begin(s); t < seqs.end(s); ++t) {
        begin[t] = seqs.begin(s);
        end[t] = seqs.end(s);
      }
    }
  }
};

// pre[t, :] for one token: the causal window restricted to t's sequence, plus the bias (if any).
template <class T>
void conv_row(T* pre, const T* x, const T* weight, const T* bias, int64_t t, int64_t seq_begin, int64_t channels,
              int64_t width) {
  for (int64_t c = 0; c < channels; ++c) pre[c] = bias ? bias[c] : T(0);
  for (int64_t i = 0; i < width; ++i) {
    const int64_t src = t - (width - 1) + i;
    if (src < seq_begin) continue;
    for (int64_t c = 0; c < channels; ++c) pre[c] += weight[c * width + i] * x[src * channels + c];
  }
}
}  // namespace

template <class T>
void short_conv_silu_forward(T* out, const T* x, const T* weight, const T* bias, const SeqLayout& seqs,
                             int64_t channels, int64_t width) {
  const TokenSequences token_seqs(seqs);
#pragma omp parallel for schedule(static) if (worth_parallel(seqs.num_tokens() * channels * width))
  for (int64_t t = 0; t < seqs.num_tokens(); ++t) {
    T* row = out + t * channels;
    conv_row(row, x, weight, bias, t, token_seqs.begin[t], channels, width);
#pragma omp simd
    for (int64_t c = 0; c < channels; ++c) row[c] = silu(row[c]);
  }
}

template <class T>
void short_conv_silu_backward(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight, const T* bias,
                              const SeqLayout& seqs, int64_t channels, int64_t width) {
  const TokenSequences token_seqs(seqs);
  const int64_t n = seqs.num_tokens();
  std::vector<T> dpre(static_cast<size_t>(n * channels));
#pragma omp parallel for schedule(static) if (worth_parallel(n * channels * width))
  for (int64_t t = 0; t < n; ++t) {
    T* row = dpre.data() + t * channels;
    conv_row(row, x, weight, bias, t, token_seqs.begin[t], channels, width);
#pragma omp simd
    for (int64_t c = 0; c < channels; ++c) row[c] = dout[t * channels + c] * silu_grad(row[c]);
  }
#pragma omp parallel for schedule(static) if (worth_parallel(n * channels * width))
  for (int64_t s = 0; s < n; ++s) {
    T* row = dx + s * channels;
    for (int64_t c = 0; c < channels; ++c) row[c] = 0;
    for (int64_t i = 0; i < width; ++i) {
      const int64_t t = s + (width - 1) - i;
      if (t >= token_seqs.end[s]) continue;
      for (int64_t c = 0; c < channels; ++c) row[c] += weight[c * width + i] * dpre[t * channels + c];
    }
  }
  accumulate_over_row_blocks(n, channels * width, dweight, [&](int64_t begin, int64_t end, T* partial) {
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t i = 0; i < width; ++i) {
        const int64_t src = t - (width - 1) + i;
        if (src < token_seqs.begin[t]) continue;
        for (int64_t c = 0; c < channels; ++c) partial[c * width + i] += dpre[t * channels + c] * x[src * channels + c];
      }
    }
  });
  if (!dbias) return;
  accumulate_over_row_blocks(n, channels, dbias, [&](int64_t begin, int64_t end, T* partial) {
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t c = 0; c < channels; ++c) partial[c] += dpre[t * channels + c];
    }
  });
}

template void short_conv_silu_forward<float>(float*, const float*, const float*, const float*, const SeqLayout&,
                                             int64_t, int64_t);
template void short_conv_silu_forward<double>(double*, const double*, const double*, const double*, const SeqLayout&,
                                              int64_t, int64_t);
template void short_conv_silu_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                              const float*, const SeqLayout&, int64_t, int64_t);
template void short_conv_silu_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                               const double*, const SeqLayout&, int64_t, int64_t);

}  // namespace linea::cpu
