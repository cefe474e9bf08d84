// Vectorized math for the element-wise CPU kernels.
//
// exp: in a file that includes this header, loops that call std::exp under `#pragma omp simd` call
// glibc's vector variants (libmvec, which libm links in as needed: 4 floats per call on baseline
// x86-64, 16 with AVX-512) instead of one scalar exp per element. glibc's <math.h> declares these
// variants only under -ffast-math, so they are declared here. Results differ from the scalar exp by
// rounding only (libmvec: ≤ 4 ulp). The kernels are built with -fno-math-errno (CMakeLists.txt):
// otherwise the errno write of each call keeps the compiler from vectorizing a loop body that also
// selects between values.
//
// max_of: a max reduction that vectorizes.
#pragma once
#include <cmath>
#include <cstdint>

#if defined(__x86_64__) && defined(__GLIBC__)
extern "C" {
#pragma omp declare simd notinbranch
float expf(float) noexcept;
#pragma omp declare simd notinbranch
double exp(double) noexcept;
}
#endif

namespace linea::cpu {

// max_j x_j over n ≥ 1 values. Written as `m > x ? m : x`, which the compiler maps onto the vector
// max instruction (std::max's `m < x ? x : m` keeps the loop scalar: one compare per cycle).
template <class T>
T max_of(const T* x, int64_t n) {
  T m = x[0];
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; ++j) m = m > x[j] ? m : x[j];
  return m;
}

}  // namespace linea::cpu
