// Column blocks of row-major [N, C] tensors (the contracts are in kernels/ops.h):
//   slice  out[n, j] = x[n, begin + j],   j < c      (out: [N, c], x: [N, C])
//   place  out[n, begin + j] = x[n, j],   j < c      (out: [N, C], x: [N, c]; other columns kept)
#pragma once
#include <cstdint>

namespace linea::cpu {

template <class T>
void column_slice(T* out, const T* x, int64_t rows, int64_t width, int64_t begin, int64_t count);
template <class T>
void column_place(T* out, const T* x, int64_t rows, int64_t width, int64_t begin, int64_t count);

}  // namespace linea::cpu
