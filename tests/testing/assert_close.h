// fla's comparison rule (reference/mixers.md §3.2): pass when max|ref − got| ≤ atol; otherwise both
// must be NaN-free and RMS(ref − got) / (RMS(ref) + 1e-8) < ratio.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "kernels/tensor.h"

namespace linea::testing {

struct CloseReport {
  double abs_err = 0;    // max |ref − got|
  double err_ratio = 0;  // RMS(ref − got) / (RMS(ref) + 1e-8)
  bool has_nan = false;
};
CloseReport compare(const Tensor& ref, const Tensor& got);
::testing::AssertionResult assert_close(const std::string& what, const Tensor& ref, const Tensor& got,
                                        double ratio, double atol = 1e-6);

// Copies a CPU tensor of any floating dtype to f64.
Tensor to_f64(const Tensor& t);
Tensor to_f32(const Tensor& t);

}  // namespace linea::testing
