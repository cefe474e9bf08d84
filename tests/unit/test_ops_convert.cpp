// ops::convert and ops::add_converted on the CPU: every pair of f32, f64 and bf16, exact where the
// target dtype holds the value, round-to-nearest-even to bf16 (ties included), accumulation with a
// single rounding, and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/ops.h"
#include "tests/testing/kernel_test.h"

namespace linea {
namespace {

using testing::throws_invalid_argument;

// Values every dtype holds exactly (8 significant bits at most), signs and zero included.
const std::vector<double> kExact = {0.0, 1.0, -2.5, 0.15625, 3072.0, -1024.0, 0.0078125};

Tensor filled(DType dtype, const std::vector<double>& values) {
  Tensor f64 = Tensor::empty({static_cast<int64_t>(values.size())}, DType::f64);
  for (size_t i = 0; i < values.size(); ++i) f64.data<double>()[i] = values[i];
  if (dtype == DType::f64) return f64;
  Tensor out = Tensor::empty(f64.shape(), dtype);
  ops::convert(out, f64);
  return out;
}

double element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::f32: return t.data<float>()[i];
    case DType::f64: return t.data<double>()[i];
    default: return static_cast<float>(t.data<bf16>()[i]);
  }
}

const DType kTypes[] = {DType::f32, DType::f64, DType::bf16};

TEST(Convert, EveryPairKeepsExactValues) {
  for (DType from : kTypes) {
    for (DType to : kTypes) {
      const Tensor in = filled(from, kExact);
      Tensor out = Tensor::empty(in.shape(), to);
      ops::convert(out, in);
      for (int64_t i = 0; i < out.numel(); ++i) {
        EXPECT_EQ(element(out, i), kExact[static_cast<size_t>(i)]) << dtype_name(from) << " → " << dtype_name(to);
      }
    }
  }
}

TEST(Convert, RoundsToNearestEvenInBf16) {
  // bf16 keeps 8 significant bits: near 1 its step is 2⁻⁷.
  const double step = std::ldexp(1.0, -7);
  const std::vector<double> in = {1 + step / 2, 1 + 3 * step / 2, 1 + step / 4, 1 + 3 * step / 4, -(1 + step / 2)};
  const std::vector<double> expected = {1.0, 1 + 2 * step, 1.0, 1 + step, -1.0};
  for (DType from : {DType::f32, DType::f64}) {
    Tensor out = Tensor::empty({5}, DType::bf16);
    ops::convert(out, filled(from, in));
    for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(element(out, i), expected[static_cast<size_t>(i)]) << i;
  }
}

TEST(AddConverted, AccumulatesWithOneRounding) {
  // f32 += bf16: exact sums stay exact.
  Tensor y = filled(DType::f32, {1.0, 2.0, -3.0});
  ops::add_converted(y, filled(DType::bf16, {0.5, -2.0, 0.0078125}));
  EXPECT_EQ(element(y, 0), 1.5);
  EXPECT_EQ(element(y, 1), 0.0);
  EXPECT_EQ(element(y, 2), -3.0 + 0.0078125);
  // bf16 += f32: the sum rounds once to bf16.
  Tensor b = filled(DType::bf16, {1.0});
  ops::add_converted(b, filled(DType::f32, {std::ldexp(3.0, -8)}));  // 1 + 1.5 steps → 1 + 2 steps
  EXPECT_EQ(element(b, 0), 1 + std::ldexp(1.0, -6));
  // f64 += f32 is exact.
  Tensor d = filled(DType::f64, {0.1});
  ops::add_converted(d, filled(DType::f32, {0.25}));
  EXPECT_EQ(element(d, 0), 0.1 + 0.25);
}

TEST(Convert, RejectsBadArguments) {
  Tensor f32 = Tensor::zeros({2, 3}, DType::f32);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::convert(f32, Tensor::zeros({3, 2}, DType::bf16));
      },
      {"convert", "in", "[2, 3]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::convert(Tensor::zeros({2, 3}, DType::i32), f32);
      },
      {"convert", "out", "f32, f64 or bf16"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { ops::add_converted(f32, Tensor()); }, {"add_converted", "in", "undefined"}));
}

}  // namespace
}  // namespace linea
