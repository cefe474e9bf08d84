// What the mixer families' random test problems share (delta_rule_problem.h, gla_problem.h): the
// shape of a problem, two tensor helpers that pass an undefined tensor (an input the mixer does not
// take) through unchanged, and the named list of a run's defined tensors.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "kernels/tensor.h"
#include "tests/testing/assert_close.h"

namespace linea::testing {

// The sequences (cu_seqlens), heads, key and value widths per head, and whether there is an
// initial state h0.
struct MixerProblemShape {
  std::vector<int64_t> cu_seqlens;
  int64_t heads = 1, key_dim = 1, value_dim = 1;
  bool with_h0 = true;
};

// t in f64 or f32.
inline Tensor cast_defined(const Tensor& t, DType dtype) {
  if (!t.defined()) return t;
  return dtype == DType::f64 ? to_f64(t) : to_f32(t);
}

// Zeros of t's shape and dtype.
inline Tensor zeros_like(const Tensor& t) { return t.defined() ? Tensor::zeros(t.shape(), t.dtype()) : Tensor(); }

// (name, tensor) for every defined one of `all`, in order: a run's outputs and gradients.
inline std::vector<std::pair<std::string, Tensor>> defined_named(
    std::initializer_list<std::pair<const char*, const Tensor*>> all) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, t] : all) {
    if (t->defined()) out.emplace_back(name, *t);
  }
  return out;
}

}  // namespace linea::testing
