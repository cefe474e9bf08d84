#include "parallel/ordered_reduce.h"

#include <stdexcept>
#include <string>
#include <type_traits>

namespace linea {

namespace {

template <class T>
using Accumulator = std::conditional_t<std::is_integral_v<T>, int64_t, double>;

template <class T>
Accumulator<T> widen(T x) {
  if constexpr (std::is_same_v<T, bf16>) {
    return static_cast<float>(x);
  } else {
    return static_cast<Accumulator<T>>(x);
  }
}

template <class T>
T narrow(Accumulator<T> x) {
  if constexpr (std::is_same_v<T, bf16>) {
    return bf16(static_cast<float>(x));
  } else {
    return static_cast<T>(x);
  }
}

}  // namespace

template <class T>
void ordered_reduce(const T* in, int ranks, int64_t n, ReduceOp op, T* out) {
  if (op == ReduceOp::avg && std::is_integral_v<T>) {
    throw std::invalid_argument("ordered_reduce: avg needs a floating type");
  }
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    Accumulator<T> sum = widen(in[i]);
    for (int r = 1; r < ranks; ++r) sum += widen(in[static_cast<int64_t>(r) * n + i]);
    if constexpr (!std::is_integral_v<T>) {
      if (op == ReduceOp::avg) sum /= ranks;
    }
    out[i] = narrow<T>(sum);
  }
}

template void ordered_reduce<float>(const float*, int, int64_t, ReduceOp, float*);
template void ordered_reduce<double>(const double*, int, int64_t, ReduceOp, double*);
template void ordered_reduce<bf16>(const bf16*, int, int64_t, ReduceOp, bf16*);
template void ordered_reduce<int32_t>(const int32_t*, int, int64_t, ReduceOp, int32_t*);
template void ordered_reduce<int64_t>(const int64_t*, int, int64_t, ReduceOp, int64_t*);

void ordered_reduce(DType dtype, const void* in, int ranks, int64_t n, ReduceOp op, void* out) {
  switch (dtype) {
    case DType::f32: return ordered_reduce(static_cast<const float*>(in), ranks, n, op, static_cast<float*>(out));
    case DType::f64: return ordered_reduce(static_cast<const double*>(in), ranks, n, op, static_cast<double*>(out));
    case DType::bf16: return ordered_reduce(static_cast<const bf16*>(in), ranks, n, op, static_cast<bf16*>(out));
    case DType::i32: return ordered_reduce(static_cast<const int32_t*>(in), ranks, n, op, static_cast<int32_t*>(out));
    case DType::i64: return ordered_reduce(static_cast<const int64_t*>(in), ranks, n, op, static_cast<int64_t*>(out));
  }
  throw std::invalid_argument("ordered_reduce: unknown dtype " + std::to_string(static_cast<int>(dtype)));
}

}  // namespace linea
