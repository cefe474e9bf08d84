// with_float_type: calls fn(T{}) with T = float for f32 and T = double for f64, so that one template
// kernel serves both; throws std::invalid_argument naming `who` for any other dtype.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

#include "kernels/dtype.h"

namespace linea {

template <class Fn>
void with_float_type(DType dtype, std::string_view who, Fn&& fn) {
  if (dtype == DType::f32) {
    fn(float{});
  } else if (dtype == DType::f64) {
    fn(double{});
  } else {
    throw std::invalid_argument(std::string(who) + ": expected f32 or f64, got " + std::string(dtype_name(dtype)));
  }
}

}  // namespace linea
