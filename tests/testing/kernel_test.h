// What the kernel tests share: random f64 inputs, i32 index tensors, and a GoogleTest check that a
// hand-written backward matches central finite differences (tests/testing/finite_difference.h), and
// a check that bad arguments throw std::invalid_argument with a message naming them.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/random.h"
#include "kernels/tensor.h"
#include "tests/testing/assert_close.h"
#include "tests/testing/finite_difference.h"

namespace linea::testing {

// f64 CPU tensor with entries uniform in [lo, hi).
inline Tensor random_tensor(const Shape& shape, Rng& rng, double lo = -1.0, double hi = 1.0) {
  Tensor t = Tensor::empty(shape, DType::f64);
  fill_uniform(t, rng, lo, hi);
  return t;
}

// A copy of the f64 tensor t in dtype dt (f32 or f64), for running one case in both precisions.
inline Tensor as_dtype(const Tensor& t, DType dt) { return dt == DType::f32 ? to_f32(t) : to_f64(t); }

// f64 CPU tensor of `shape` holding `v` (row-major).
inline Tensor values(const Shape& shape, const std::vector<double>& v) {
  Tensor t = Tensor::empty(shape, DType::f64);
  std::copy(v.begin(), v.end(), t.data<double>());
  return t;
}

// i32 CPU tensor holding `values`.
inline Tensor index_tensor(const std::vector<int32_t>& values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::i32);
  std::copy(values.begin(), values.end(), t.data<int32_t>());
  return t;
}

// Checks the analytic gradient of `loss` with respect to `input` (both f64) against finite
// differences on up to `max_entries` entries: the largest relative error must stay below `tolerance`.
// The error is also recorded as a test property (in --gtest_output=xml reports).
inline ::testing::AssertionResult gradient_matches(const std::string& what, const std::function<double()>& loss,
                                                   Tensor input, const Tensor& analytic, double tolerance = 1e-5,
                                                   int64_t max_entries = 64) {
  const GradCheck r = gradcheck(loss, input, analytic, max_entries, 1e-5);
  std::ostringstream report;
  report << what << ": max rel err " << r.max_rel_err << ", max abs err " << r.max_abs_err << " over " << r.checked
         << " entries (limit " << tolerance << ")";
  std::ostringstream rel_err;
  rel_err << r.max_rel_err;
  ::testing::Test::RecordProperty("max_rel_err " + what, rel_err.str());
  if (r.checked > 0 && r.max_rel_err < tolerance) return ::testing::AssertionSuccess() << report.str();
  return ::testing::AssertionFailure() << report.str();
}

// Passes when fn throws std::invalid_argument whose message contains every one of `fragments`.
inline ::testing::AssertionResult throws_invalid_argument(const std::function<void()>& fn,
                                                          const std::vector<std::string>& fragments) {
  try {
    fn();
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    for (const std::string& f : fragments) {
      if (message.find(f) == std::string::npos) {
        return ::testing::AssertionFailure() << "message \"" << message << "\" lacks \"" << f << "\"";
      }
    }
    return ::testing::AssertionSuccess() << message;
  }
  return ::testing::AssertionFailure() << "no std::invalid_argument thrown";
}

}  // namespace linea::testing
