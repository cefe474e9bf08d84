// Deterministic sums over rows, for parameter gradients such as dweight[j] += Σ_n f(n, j).
//
// The rows are cut into fixed blocks of kRowsPerBlock (the cut does not depend on the number of
// threads). Blocks run in parallel; each adds its rows' contributions into its own zeroed partial
// of `width` values; the partials are then added into `out` in block order. The result is the same
// bit for bit whatever the number of OpenMP threads.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/parallel.h"

namespace linea::cpu {

inline constexpr int64_t kRowsPerBlock = 128;

// add_rows(begin, end, partial) must add the contributions of rows [begin, end) into partial[0, width).
template <class T, class AddRows>
void accumulate_over_row_blocks(int64_t rows, int64_t width, T* out, AddRows add_rows) {
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  if (blocks == 0 || width == 0) return;
  std::vector<T> partials(static_cast<size_t>(blocks * width), T(0));
#pragma omp parallel for schedule(static) if (worth_parallel(rows * width))
  for (int64_t b = 0; b < blocks; ++b) {
    add_rows(b * kRowsPerBlock, std::min(rows, (b + 1) * kRowsPerBlock), partials.data() + b * width);
  }
#pragma omp parallel for schedule(static) if (worth_parallel(blocks * width))
  for (int64_t j = 0; j < width; ++j) {
    T sum = 0;
    for (int64_t b = 0; b < blocks; ++b) sum += partials[b * width + j];
    out[j] += sum;
  }
}

}  // namespace linea::cpu
