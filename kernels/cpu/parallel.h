// When an OpenMP loop pays: below about kMinParallelWork scalar operations, waking the threads
// (and, on a loaded machine, waiting for the slowest of them) costs more than the work itself.
// Loops use it as `#pragma omp parallel for if (worth_parallel(work))`.
//
// for_each_block(n, body) runs body(begin, end) over [0, n) cut into fixed blocks of
// kElementsPerBlock, in parallel when worth it. The cut does not depend on the number of threads, so
// an element-wise body vectorized with `#pragma omp simd` (whose vector and scalar remainder paths
// may round differently, e.g. libmvec's exp) gives the same bits whatever the number of threads.
#pragma once
#include <algorithm>
#include <cstdint>

namespace linea::cpu {

inline constexpr int64_t kMinParallelWork = int64_t{1} << 15;
inline bool worth_parallel(int64_t work) { return work >= kMinParallelWork; }

inline constexpr int64_t kElementsPerBlock = 4096;

template <class Body>
void for_each_block(int64_t n, Body body) {
  const int64_t blocks = (n + kElementsPerBlock - 1) / kElementsPerBlock;
#pragma omp parallel for schedule(static) if (worth_parallel(n))
  for (int64_t b = 0; b < blocks; ++b) body(b * kElementsPerBlock, std::min(n, (b + 1) * kElementsPerBlock));
}

}  // namespace linea::cpu
