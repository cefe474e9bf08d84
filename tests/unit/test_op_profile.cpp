// The op profile (kernels/op_profile.h) on the CPU: calls counted per op and signature, times
// positive and ordered, nested ops counted once, throwing ops and calls outside start/stop not at
// all, and a start forgets the previous profile.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kernels/op_arguments.h"
#include "kernels/op_profile.h"
#include "kernels/ops.h"

namespace linea {
namespace {

const ops::OpProfileEntry* find(const std::vector<ops::OpProfileEntry>& entries, const std::string& op,
                                const std::string& signature) {
  for (const ops::OpProfileEntry& e : entries) {
    if (e.op == op && e.signature == signature) return &e;
  }
  return nullptr;
}

// The entry of `op` with `signature`, expected there with `calls` calls (null when it is missing).
const ops::OpProfileEntry* expect_calls(const std::vector<ops::OpProfileEntry>& entries, const std::string& op,
                                        const std::string& signature, int64_t calls) {
  const ops::OpProfileEntry* e = find(entries, op, signature);
  EXPECT_NE(e, nullptr) << op << " " << signature;
  if (e != nullptr) {
    EXPECT_EQ(e->calls, calls) << op << " " << signature;
  }
  return e;
}

// An op that holds its span open for `ms` and, when `inner`, calls another profiled op inside.
void sleeping_op(const Tensor& x, int ms, bool inner) {
  ops::OpArguments args("sleeping_op");
  args.floating(x, "x", {ops::kAnyDim});
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  if (inner) {
    ops::OpArguments nested("nested_op");
    nested.floating(x, "x", {ops::kAnyDim});
  }
}

class OpProfile : public ::testing::Test {
 protected:
  void TearDown() override { ops::op_profile_stop(); }
};

// The dtype conversions (mixed precision's weight copy and gradient accumulation) are timed like
// every op: out's dtype and both shapes.
TEST_F(OpProfile, TimesTheDtypeConversions) {
  Tensor f32 = Tensor::zeros({4, 3}, DType::f32), f64 = Tensor::zeros({4, 3}, DType::f64);
  ops::op_profile_start();
  ops::convert(f64, f32);
  ops::add_converted(f64, f32);
  ops::add_converted(f64, f32);
  ops::op_profile_stop();
  const std::vector<ops::OpProfileEntry> entries = ops::op_profile_entries();
  expect_calls(entries, "convert", "f64 out[4, 3] in[4, 3]", 1);
  expect_calls(entries, "add_converted", "f64 out[4, 3] in[4, 3]", 2);
}

TEST_F(OpProfile, CountsCallsPerOpAndSignature) {
  Tensor a = Tensor::zeros({4, 3}, DType::f32), b = Tensor::zeros({5, 3}, DType::f32);
  Tensor w = Tensor::zeros({2, 3}, DType::f32);
  Tensor out_a = Tensor::empty({4, 2}, DType::f32), out_b = Tensor::empty({5, 2}, DType::f32);
  ops::linear_forward(out_a, a, w, Tensor());  // before the start: not counted
  ops::op_profile_start();
  EXPECT_TRUE(ops::op_profile_on());
  for (int i = 0; i < 3; ++i) ops::linear_forward(out_a, a, w, Tensor());
  ops::linear_forward(out_b, b, w, Tensor());
  ops::op_profile_stop();
  ops::linear_forward(out_b, b, w, Tensor());  // after the stop: not counted
  const std::vector<ops::OpProfileEntry> entries = ops::op_profile_entries();
  ASSERT_EQ(entries.size(), 2u);
  const ops::OpProfileEntry* four = expect_calls(entries, "linear_forward", "f32 x[4, 3] weight[2, 3]", 3);
  const ops::OpProfileEntry* five = expect_calls(entries, "linear_forward", "f32 x[5, 3] weight[2, 3]", 1);
  ASSERT_NE(four, nullptr);
  ASSERT_NE(five, nullptr);
  EXPECT_GT(four->total_ms, 0);
  EXPECT_GT(five->total_ms, 0);
}

TEST_F(OpProfile, TimesTheWholeCallAndNestedOpsOnce) {
  Tensor x = Tensor::zeros({8}, DType::f64);
  ops::op_profile_start();
  sleeping_op(x, 30, /*inner=*/true);
  sleeping_op(x, 1, /*inner=*/false);
  const std::vector<ops::OpProfileEntry> entries = ops::op_profile_entries();
  ASSERT_EQ(entries.size(), 1u) << "the nested op counts inside the outer one only";
  EXPECT_EQ(entries[0].op, "sleeping_op");
  EXPECT_EQ(entries[0].signature, "f64 x[8]");
  EXPECT_EQ(entries[0].calls, 2);
  EXPECT_GE(entries[0].total_ms, 31.0);
  EXPECT_LT(entries[0].total_ms, 5000.0);
  {  // outside any other op, the same op is outermost and counted
    ops::OpArguments alone("nested_op");
    alone.floating(x, "x", {ops::kAnyDim});
  }
  EXPECT_NE(find(ops::op_profile_entries(), "nested_op", "f64 x[8]"), nullptr);
}

TEST_F(OpProfile, LargestTotalFirstAndStartForgets) {
  Tensor x = Tensor::zeros({2}, DType::f64), y = Tensor::zeros({3}, DType::f64);
  ops::op_profile_start();
  sleeping_op(x, 1, false);
  sleeping_op(y, 80, false);  // well apart from the 1 ms op even on a loaded machine
  std::vector<ops::OpProfileEntry> entries = ops::op_profile_entries();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].signature, "f64 x[3]");
  EXPECT_GE(entries[0].total_ms, entries[1].total_ms);
  ops::op_profile_start();
  EXPECT_TRUE(ops::op_profile_entries().empty());
}

TEST_F(OpProfile, AThrowingOpIsNotCounted) {
  Tensor x = Tensor::zeros({4, 3}, DType::f32), w = Tensor::zeros({2, 5}, DType::f32);
  Tensor out = Tensor::empty({4, 2}, DType::f32);
  ops::op_profile_start();
  EXPECT_THROW(ops::linear_forward(out, x, w, Tensor()), std::invalid_argument);
  EXPECT_TRUE(ops::op_profile_entries().empty());
  // The failed call left no span open: the next op is outermost and counted.
  Tensor w_ok = Tensor::zeros({2, 3}, DType::f32);
  ops::linear_forward(out, x, w_ok, Tensor());
  const std::vector<ops::OpProfileEntry> entries = ops::op_profile_entries();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].calls, 1);
}

TEST_F(OpProfile, OffByDefaultAndCountsNothing) {
  ops::op_profile_start();
  ops::op_profile_stop();
  EXPECT_FALSE(ops::op_profile_on());
  Tensor x = Tensor::zeros({2}, DType::f64);
  sleeping_op(x, 1, true);
  EXPECT_TRUE(ops::op_profile_entries().empty());
}

}  // namespace
}  // namespace linea
