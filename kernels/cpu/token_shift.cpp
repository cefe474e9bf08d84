#include "kernels/cpu/token_shift.h"

#include <vector>

#include "kernels/cpu/parallel.h"

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

template void token_shift_forward<float>(float*, const float*, const SeqLayout&, int64_t);
template void token_shift_forward<double>(double*, const double*, const SeqLayout&, int64_t);
template void token_shift_backward<float>(float*, const float*, const SeqLayout&, int64_t);
template void token_shift_backward<double>(double*, const double*, const SeqLayout&, int64_t);

}  // namespace linea::cpu
