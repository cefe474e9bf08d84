#include "kernels/cpu/add_inplace.h"

#include "kernels/cpu/parallel.h"

namespace linea::cpu {

template <class T>
void add_inplace(T* y, const T* x, int64_t n) {
#pragma omp parallel for schedule(static) if (worth_parallel(n))
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

template void add_inplace<float>(float*, const float*, int64_t);
template void add_inplace<double>(double*, const double*, int64_t);

}  // namespace linea::cpu
