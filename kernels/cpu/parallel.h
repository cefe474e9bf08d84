// When an OpenMP loop pays: below about kMinParallelWork scalar operations, waking the threads
// (and, on a loaded machine, waiting for the slowest of them) costs more than the work itself.
// Loops use it as `#pragma omp parallel for if (worth_parallel(work))`.
#pragma once
#include <cstdint>

namespace linea::cpu {

inline constexpr int64_t kMinParallelWork = int64_t{1} << 15;
inline bool worth_parallel(int64_t work) { return work >= kMinParallelWork; }

}  // namespace linea::cpu
