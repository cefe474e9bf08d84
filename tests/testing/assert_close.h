// fla's comparison rule (reference/mixers.md §3.2): pass when max|ref − got| ≤ atol; otherwise both
// must be NaN-free and RMS(ref − got) / (RMS(ref) + 1e-8) < ratio.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "kernels/tensor.h"

namespace linea::testing {

struct CloseReport {
  double abs_err = 0;    // max |ref − got|
  double err_ratio = 0;  // RMS(ref − got) / (RMS(ref) + 1e-8)
  bool has_nan = false;
};
CloseReport compare(const Tensor& ref, const Tensor& got);
::testing::AssertionResult assert_close(const std::string& what, const Tensor& ref, const Tensor& got, double ratio,
                                        double atol = 1e-6);

// Expects every named CPU tensor of `got` to hold the same bits as the one in the same place of
// `expected` (two ways of computing one problem that must agree exactly); `what` names the case
// in the failure message, with the tensor's name and err_ratio.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
void expect_same_bits(const NamedTensors& expected, const NamedTensors& got, const std::string& what);

// Copies a CPU tensor of any floating dtype to f64.
Tensor to_f64(const Tensor& t);
Tensor to_f32(const Tensor& t);

}  // namespace linea::testing
