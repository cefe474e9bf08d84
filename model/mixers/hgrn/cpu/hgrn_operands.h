// How the CPU kernels of HGRN's recurrence see their operands (the math is in
// model/mixers/hgrn/hgrn.h): dense row-major buffers, one row of `channels` values per token.
#pragma once
#include <cstdint>

namespace linea::cpu {

template <class T>
struct HgrnOperands {
  int64_t channels = 0;
  const T* x = nullptr;   // [N, D]
  const T* g = nullptr;   // [N, D], log decays
  const T* h0 = nullptr;  // [S, D] or null (zeros)
};

// Gradients, overwritten for every token of every sequence; dh0 may be null.
template <class T>
struct HgrnGradients {
  T *dx = nullptr, *dg = nullptr, *dh0 = nullptr;
};

}  // namespace linea::cpu
