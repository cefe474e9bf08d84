// y += x over n contiguous elements.
#pragma once
#include <cstdint>

namespace linea::cpu {

template <class T>
void add_inplace(T* y, const T* x, int64_t n);

}  // namespace linea::cpu
