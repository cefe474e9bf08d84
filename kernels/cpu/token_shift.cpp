#include "kernels/cpu/token_shift.h"

#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/row_blocks.h"

namespace linea::cpu {

namespace {
// first[t]: whether token t starts its sequence; last[t]: whether it ends it.
struct Boundaries {
  std::vector<char> first, last;
};
Boundaries boundaries(const SeqLayout& seqs) {
  const int64_t n = seqs.num_tokens();
  Boundaries b{std::vector<char>(static_cast<size_t>(n), 0), std::vector<char>(static_cast<size_t>(n), 0)};
  for (int64_t s = 0; s < seqs.num_seqs(); ++s) {
    if (seqs.end(s) == seqs.begin(s)) continue;
    b.first[static_cast<size_t>(seqs.begin(s))] = 1;
    b.last[static_cast<size_t>(seqs.end(s) - 1)] = 1;
  }
  return b;
}
}  // namespace

template <class T>
void token_shift_forward(T* delta, const T* x, const SeqLayout& seqs, int64_t width) {
  const int64_t n = seqs.num_tokens();
  const Boundaries b = boundaries(seqs);
#pragma omp parallel for schedule(static) if (worth_parallel(n * width))
  for (int64_t t = 0; t < n; ++t) {
    const T* previous = b.first[t] ? nullptr : x + (t - 1) * width;
    for (int64_t c = 0; c < width; ++c) delta[t * width + c] = (previous ? previous[c] : T(0)) - x[t * width + c];
  }
}

template <class T>
void token_shift_backward(T* dx, const T* ddelta, const SeqLayout& seqs, int64_t width) {
  const int64_t n = seqs.num_tokens();
  const Boundaries b = boundaries(seqs);
#pragma omp parallel for schedule(static) if (worth_parallel(n * width))
  for (int64_t t = 0; t < n; ++t) {
    const T* next = b.last[t] ? nullptr : ddelta + (t + 1) * width;
    for (int64_t c = 0; c < width; ++c) dx[t * width + c] = (next ? next[c] : T(0)) - ddelta[t * width + c];
  }
}

template <class T>
void lerp_forward(T* out, const T* x, const T* delta, const T* mu, bool mu_per_row, int64_t rows, int64_t width) {
#pragma omp parallel for schedule(static) if (worth_parallel(rows * width))
  for (int64_t n = 0; n < rows; ++n) {
    const T* m = mu_per_row ? mu + n * width : mu;
    for (int64_t c = 0; c < width; ++c) out[n * width + c] = x[n * width + c] + delta[n * width + c] * m[c];
  }
}

template <class T>
void lerp_backward(T* ddelta, T* dmu, const T* dout, const T* delta, const T* mu, bool mu_per_row, int64_t rows,
                   int64_t width) {
  if (mu_per_row) {
#pragma omp parallel for schedule(static) if (worth_parallel(rows * width))
    for (int64_t i = 0; i < rows * width; ++i) dmu[i] = dout[i] * delta[i];
  } else {
    accumulate_over_row_blocks(rows, width, dmu, [&](int64_t begin, int64_t end, T* partial) {
      for (int64_t n = begin; n < end; ++n) {
        for (int64_t c = 0; c < width; ++c) partial[c] += dout[n * width + c] * delta[n * width + c];
      }
    });
  }
#pragma omp parallel for schedule(static) if (worth_parallel(rows * width))
  for (int64_t n = 0; n < rows; ++n) {
    const T* m = mu_per_row ? mu + n * width : mu;
    for (int64_t c = 0; c < width; ++c) ddelta[n * width + c] += dout[n * width + c] * m[c];
  }
}

template void lerp_forward<float>(float*, const float*, const float*, const float*, bool, int64_t, int64_t);
template void lerp_forward<double>(double*, const double*, const double*, const double*, bool, int64_t, int64_t);
template void lerp_backward<float>(float*, float*, const float*, const float*, const float*, bool, int64_t, int64_t);
template void lerp_backward<double>(double*, double*, const double*, const double*, const double*, bool, int64_t,
                                    int64_t);
template void token_shift_forward<float>(float*, const float*, const SeqLayout&, int64_t);
template void token_shift_forward<double>(double*, const double*, const SeqLayout&, int64_t);
template void token_shift_backward<float>(float*, const float*, const SeqLayout&, int64_t);
template void token_shift_backward<double>(double*, const double*, const SeqLayout&, int64_t);

}  // namespace linea::cpu
