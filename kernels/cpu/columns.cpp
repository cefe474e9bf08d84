#include "kernels/cpu/columns.h"

#include <algorithm>

#include "kernels/cpu/parallel.h"

namespace linea::cpu {

template <class T>
void column_slice(T* out, const T* x, int64_t rows, int64_t width, int64_t begin, int64_t count) {
#pragma omp parallel for schedule(static) if (worth_parallel(rows * count))
  for (int64_t n = 0; n < rows; ++n) std::copy_n(x + n * width + begin, count, out + n * count);
}

template <class T>
void column_place(T* out, const T* x, int64_t rows, int64_t width, int64_t begin, int64_t count) {
#pragma omp parallel for schedule(static) if (worth_parallel(rows * count))
  for (int64_t n = 0; n < rows; ++n) std::copy_n(x + n * count, count, out + n * width + begin);
}

template void column_slice<float>(float*, const float*, int64_t, int64_t, int64_t, int64_t);
template void column_slice<double>(double*, const double*, int64_t, int64_t, int64_t, int64_t);
template void column_place<float>(float*, const float*, int64_t, int64_t, int64_t, int64_t);
template void column_place<double>(double*, const double*, int64_t, int64_t, int64_t, int64_t);

}  // namespace linea::cpu
