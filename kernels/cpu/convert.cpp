#include "kernels/cpu/convert.h"

#include <type_traits>

#include "kernels/cpu/parallel.h"
#include "kernels/dtype.h"

namespace linea::cpu {

namespace {
double widen(double x) { return x; }
double widen(float x) { return x; }
double widen(bf16 x) { return static_cast<float>(x); }

template <class To>
To narrow(double x) {
  if constexpr (std::is_same_v<To, bf16>) {
    return bf16(static_cast<float>(x));
  } else {
    return static_cast<To>(x);
  }
}
}  // namespace

template <class To, class From>
void convert(To* out, const From* in, int64_t n, bool accumulate) {
  if (accumulate) {
#pragma omp parallel for schedule(static) if (worth_parallel(n))
    for (int64_t i = 0; i < n; ++i) out[i] = narrow<To>(widen(out[i]) + widen(in[i]));
  } else {
#pragma omp parallel for schedule(static) if (worth_parallel(n))
    for (int64_t i = 0; i < n; ++i) out[i] = narrow<To>(widen(in[i]));
  }
}

#define LINEA_CONVERT(To, From) template void convert<To, From>(To*, const From*, int64_t, bool);
#define LINEA_CONVERT_FROM(From) LINEA_CONVERT(float, From) LINEA_CONVERT(double, From) LINEA_CONVERT(bf16, From)
LINEA_CONVERT_FROM(float)
LINEA_CONVERT_FROM(double)
LINEA_CONVERT_FROM(bf16)
#undef LINEA_CONVERT_FROM
#undef LINEA_CONVERT

}  // namespace linea::cpu
