#include "kernels/cpu/embedding.h"

#include <algorithm>

#include "kernels/cpu/parallel.h"

namespace linea::cpu {

template <class T>
void embedding_forward(T* out, const T* table, const int32_t* ids, int64_t n, int64_t d, int64_t vocab_begin,
                       int64_t v) {
#pragma omp parallel for schedule(static) if (worth_parallel(n * d))
  for (int64_t t = 0; t < n; ++t) {
    const int64_t row = ids[t] - vocab_begin;
    if (row >= 0 && row < v) {
      std::copy_n(table + row * d, d, out + t * d);
    } else {
      std::fill_n(out + t * d, d, T(0));
    }
  }
}

// Several tokens may share an id, so threads own column slices of dtable rather than tokens: each
// element of dtable is summed over n in order by exactly one thread (deterministic, no races).
template <class T>
void embedding_backward(T* dtable, const T* dout, const int32_t* ids, int64_t n, int64_t d, int64_t vocab_begin,
                        int64_t v) {
  constexpr int64_t kColumnsPerSlice = 64;
  const int64_t slices = (d + kColumnsPerSlice - 1) / kColumnsPerSlice;
#pragma omp parallel for schedule(static) if (worth_parallel(n * d))
  for (int64_t s = 0; s < slices; ++s) {
    const int64_t begin = s * kColumnsPerSlice, end = std::min(d, begin + kColumnsPerSlice);
    for (int64_t t = 0; t < n; ++t) {
      const int64_t row_index = ids[t] - vocab_begin;
      if (row_index < 0 || row_index >= v) continue;
      T* row = dtable + row_index * d;
      const T* g = dout + t * d;
      for (int64_t j = begin; j < end; ++j) row[j] += g[j];
    }
  }
}

template void embedding_forward<float>(float*, const float*, const int32_t*, int64_t, int64_t, int64_t, int64_t);
template void embedding_forward<double>(double*, const double*, const int32_t*, int64_t, int64_t, int64_t, int64_t);
template void embedding_backward<float>(float*, const float*, const int32_t*, int64_t, int64_t, int64_t, int64_t);
template void embedding_backward<double>(double*, const double*, const int32_t*, int64_t, int64_t, int64_t, int64_t);

}  // namespace linea::cpu
