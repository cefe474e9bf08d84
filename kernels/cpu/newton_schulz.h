// The CPU loop of ops::newton_schulz (kernels/newton_schulz.h, which states the math) over raw
// row-major arrays, its GEMMs through BLAS; templates over float and double.
#pragma once
#include <cstdint>

namespace linea::cpu {

// g, out: rows × cols (out may be g); workspace: ops::newton_schulz_workspace_numel(rows, cols) elements.
template <class T>
void newton_schulz(const T* g, T* out, int64_t rows, int64_t cols, int steps, T* workspace);

}  // namespace linea::cpu
