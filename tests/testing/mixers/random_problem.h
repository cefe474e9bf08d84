// What the mixer families' random test problems share (delta_rule_problem.h, gla_problem.h): the
// shape of a problem, two tensor helpers that pass an undefined tensor (an input the mixer does not
// take) through unchanged, the named list of a run's defined tensors and their comparison by name,
// test names of gate normalizers, and the finite-difference check of an op's gradient of one input.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "kernels/tensor.h"
#include "tests/testing/assert_close.h"
#include "tests/testing/finite_difference.h"

namespace linea::testing {

// The sequences (cu_seqlens), heads, key and value widths per head, and whether there is an
// initial state h0.
struct MixerProblemShape {
  std::vector<int64_t> cu_seqlens;
  int64_t heads = 1, key_dim = 1, value_dim = 1;
  bool with_h0 = true;
};

// cu_seqlens of one token in each of `sequences` sequences (decoding's step).
inline std::vector<int64_t> one_token_each(int64_t sequences) {
  std::vector<int64_t> cu(static_cast<size_t>(sequences + 1));
  for (int64_t s = 0; s <= sequences; ++s) cu[static_cast<size_t>(s)] = s;
  return cu;
}

// The shapes on which the recurrent (one-token) CUDA kernels of the delta rule and the GLA family
// are checked against the CPU: one token per sequence (64 sequences × 4 heads at K = V = 128; K =
// 256, V = 512), packed prompts of several tokens, each register tiling (K ≤ 64, ≤ 128, ≤ 256) with
// K and V off the multiples of 32, and no h0.
struct NamedShape {
  const char* name;
  MixerProblemShape shape;
};
inline const std::vector<NamedShape>& recurrent_kernel_shapes() {
  static const std::vector<NamedShape> all = {
      {"step_S64_H4_K128_V128", {one_token_each(64), 4, 128, 128, true}},
      {"step_S3_H2_K256_V512", {one_token_each(3), 2, 256, 512, true}},
      {"prompts_5_1_13_H2_K64_V64", {{0, 5, 6, 19}, 2, 64, 64, true}},
      {"prompts_7_13_H3_K100_V48", {{0, 7, 20}, 3, 100, 48, true}},
      {"prompts_4_9_H1_K200_V40", {{0, 4, 13}, 1, 200, 40, true}},
      {"step_S2_H1_K33_V19_no_h0", {one_token_each(2), 1, 33, 19, false}},
  };
  return all;
}

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

// A gate normalizer as part of a test's name: 0.1 → "0p1", 10 → "10".
inline std::string normalizer_name(double normalizer) {
  std::ostringstream os;
  os << normalizer;
  std::string n = os.str();
  std::replace(n.begin(), n.end(), '.', 'p');
  return n;
}

// Every tensor of `got` (a run's named()) against the one of the same name in `ref` to rtol `rtol`
// (atol 0); `context` goes with each failure. Returns how many were compared.
inline int expect_named_close(const std::vector<std::pair<std::string, Tensor>>& ref,
                              const std::vector<std::pair<std::string, Tensor>>& got, double rtol,
                              const std::string& context = "") {
  int compared = 0;
  for (const auto& [name, t] : got) {
    for (const auto& [ref_name, ref_t] : ref) {
      if (name == ref_name) {
        EXPECT_TRUE(assert_close(name, ref_t, t, rtol, 0)) << context;
        ++compared;
      }
    }
  }
  return compared;
}

// A mixer op's f64 gradient `grad` of `input` against central differences of `loss` (eps 1e-5) on
// up to `entries` entries. Truncation ~1e-10, rounding ~1e-16·|L|/eps ~1e-9 absolute, which is also
// the worst relative error of entries near the 1e-6 floor; the gradients are ~1e-2..1.
inline void expect_gradient_matches(const std::string& name, const std::function<double()>& loss, Tensor input,
                                    const Tensor& grad, int64_t entries = 48) {
  const GradCheck g = gradcheck(loss, input, grad, entries, 1e-5);
  EXPECT_EQ(g.checked, std::min<int64_t>(entries, input.numel())) << name;
  EXPECT_LT(g.max_abs_err, 1e-7) << name;
  EXPECT_LT(g.max_rel_err, 1e-4) << name << ": max_abs_err " << g.max_abs_err;
}

}  // namespace linea::testing
