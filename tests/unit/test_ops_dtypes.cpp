// The dtype rules every op checks before it dispatches (kernels/op_arguments.h), on both devices:
// f32/f64 on the CPU, f32/bf16 on CUDA, one dtype per call, statistics (rstd) f32 in bf16 calls.
// Only failing calls are made, so no device memory is touched: CUDA tensors here are views of host
// memory, and the tests run in every build, with or without a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/ops.h"
#include "tests/testing/kernel_test.h"

namespace linea {
namespace {

using testing::throws_invalid_argument;

// Views of one zeroed host buffer, tagged with any dtype and device.
class Views {
 public:
  Tensor operator()(const Shape& shape, DType dtype, Device device = Device::cpu) {
    return Tensor::view(buffer_.data(), shape, dtype, device);
  }

 private:
  std::vector<double> buffer_ = std::vector<double>(256, 0.0);
};

TEST(OpsDtypes, Bf16NeedsCuda) {
  Views v;
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::swiglu_forward(v({2, 3}, DType::bf16), v({2, 3}, DType::bf16), v({2, 3}, DType::bf16));
      },
      {"swiglu_forward", "gate", "expected an f32 or f64 tensor", "bf16[2, 3] cpu"}));
}

TEST(OpsDtypes, F64StaysOnTheCpu) {
  Views v;
  const Device gpu = Device::cuda;
  EXPECT_TRUE(throws_invalid_argument([&] { ops::add_inplace(v({4}, DType::f64, gpu), v({4}, DType::f64, gpu)); },
                                      {"add_inplace", "y", "expected an f32 or bf16 tensor", "f64[4] cuda"}));
}

TEST(OpsDtypes, OneDtypePerCall) {
  Views v;
  const Device gpu = Device::cuda;
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::swiglu_forward(v({2, 3}, DType::f32, gpu), v({2, 3}, DType::bf16, gpu), v({2, 3}, DType::f32, gpu));
      },
      {"swiglu_forward", "up", "expected bf16 (like gate)"}));
}

TEST(OpsDtypes, StatisticsAreF32InBf16Calls) {
  Views v;
  const Device gpu = Device::cuda;
  const DType bf = DType::bf16;
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::rmsnorm_forward(v({3, 4}, bf, gpu), v({3}, bf, gpu), v({3, 4}, bf, gpu), v({4}, bf, gpu), 1e-6);
      },
      {"rmsnorm_forward", "rstd", "expected f32 (statistics of bf16 x)", "bf16[3] cuda"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::l2norm_forward(v({3, 4}, bf, gpu), v({3, 2}, DType::f32), v({3, 4}, bf, gpu), 2, 1e-6);
      },
      {"l2norm_forward", "rstd", "expected a cuda tensor"}));
  // In an f32 or f64 call, rstd has the call's dtype.
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::rmsnorm_forward(v({3, 4}, DType::f64), v({3}, DType::f32), v({3, 4}, DType::f64), v({4}, DType::f64),
                             1e-6);
      },
      {"rmsnorm_forward", "rstd", "expected f64"}));
}

TEST(OpsDtypes, IndicesStayI32) {
  Views v;
  const Device gpu = Device::cuda;
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::embedding_forward(v({2, 3}, DType::bf16, gpu), v({5, 3}, DType::bf16, gpu), v({2}, DType::i64, gpu));
      },
      {"embedding_forward", "ids", "expected an i32 tensor"}));
}

}  // namespace
}  // namespace linea
