// Launch geometry shared by the CUDA ops: block counts for grid-stride loops, sized from the
// device's multiprocessor count so that small problems launch few blocks and large ones enough to
// fill every multiprocessor several times over.
#pragma once
#include <cstdint>

namespace linea::cuda {

inline constexpr int kThreadsPerBlock = 256;

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Multiprocessors of the current device (cached per device).
int multiprocessor_count();

// Blocks of `threads` for a grid-stride loop over `items`: at least 1, at most 16 per multiprocessor.
int grid_stride_blocks(int64_t items, int threads = kThreadsPerBlock);

}  // namespace linea::cuda
