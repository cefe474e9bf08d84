// CUDA GEMM-based ops against the CPU reference (f64 on the same inputs), in f32 and bf16: the
// linear layer (with and without bias, dx overwritten or accumulated, each gradient optional) and
// the fused LM head + cross-entropy under several tilings of the logits (one tile, several row
// blocks, several vocabulary chunks with ragged ends), with ignored targets and gradients
// accumulated onto a nonzero dweight.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cuda/ops.h"
#include "kernels/ops.h"
#include "tests/gpu/gpu_test.h"

namespace linea {
namespace {

using testing::assert_close;
using testing::random_values;
using testing::to_device;
using testing::to_host;
using testing::tolerance;

class GpuLinear : public testing::GpuDtypeTest {};

Tensor device_empty(const Shape& s, DType dt) { return Tensor::empty(s, dt, Device::cuda); }

TEST_P(GpuLinear, ForwardAndBackward) {
  const DType dt = GetParam();
  Rng rng(1);
  struct Case {
    int64_t n, in, out;
    bool bias, accumulate_dx;
  };
  for (const Case c : {Case{1, 1, 1, true, false}, Case{7, 5, 3, false, true}, Case{77, 96, 130, true, false},
                       Case{256, 1024, 512, true, true}}) {
    const Tensor x = random_values({c.n, c.in}, dt, rng), w = random_values({c.out, c.in}, dt, rng);
    const Tensor b = c.bias ? random_values({c.out}, dt, rng) : Tensor();
    const Tensor dout = random_values({c.n, c.out}, dt, rng), dx0 = random_values({c.n, c.in}, dt, rng);
    const Tensor dw0 = random_values({c.out, c.in}, dt, rng), db0 = random_values({c.out}, dt, rng);
    Tensor out = Tensor::empty({c.n, c.out}, DType::f64), dx = dx0.clone(), dw = dw0.clone(), db = db0.clone();
    ops::linear_forward(out, x, w, b);
    ops::linear_backward(dx, dw, c.bias ? db : Tensor(), dout, x, w, c.accumulate_dx);

    Tensor gx = to_device(x, dt), gw = to_device(w, dt), gout = device_empty({c.n, c.out}, dt);
    Tensor gdx = to_device(dx0, dt), gdw = to_device(dw0, dt), gdb = to_device(db0, dt);
    ops::linear_forward(gout, gx, gw, c.bias ? to_device(b, dt) : Tensor());
    ops::linear_backward(gdx, gdw, c.bias ? gdb : Tensor(), to_device(dout, dt), gx, gw, c.accumulate_dx);
    EXPECT_TRUE(assert_close("out", out, to_host(gout), tolerance(dt)));
    EXPECT_TRUE(assert_close("dx", dx, to_host(gdx), tolerance(dt)));
    EXPECT_TRUE(assert_close("dweight", dw, to_host(gdw), tolerance(dt)));
    if (c.bias) {
      EXPECT_TRUE(assert_close("dbias", db, to_host(gdb), tolerance(dt)));
    }
  }
}

TEST_P(GpuLinear, SkippedGradientsAreLeftAlone) {
  const DType dt = GetParam();
  Rng rng(2);
  const int64_t n = 9, in = 16, out = 8;
  const Tensor x = random_values({n, in}, dt, rng), w = random_values({out, in}, dt, rng);
  const Tensor dout = random_values({n, out}, dt, rng), dw0 = random_values({out, in}, dt, rng);
  Tensor dw = dw0.clone();
  ops::linear_backward(Tensor(), dw, Tensor(), dout, x, w, false);
  Tensor gdw = to_device(dw0, dt);
  ops::linear_backward(Tensor(), gdw, Tensor(), to_device(dout, dt), to_device(x, dt), to_device(w, dt), false);
  EXPECT_TRUE(assert_close("dweight only", dw, to_host(gdw), tolerance(dt)));
  Tensor gdx = device_empty({n, in}, dt), dx = Tensor::empty({n, in}, DType::f64);
  ops::linear_backward(dx, Tensor(), Tensor(), dout, x, w, false);
  ops::linear_backward(gdx, Tensor(), Tensor(), to_device(dout, dt), to_device(x, dt), to_device(w, dt), false);
  EXPECT_TRUE(assert_close("dx only", dx, to_host(gdx), tolerance(dt)));
}

// Targets in [0, v), every 7th row ignored (−1).
Tensor targets_for(int64_t n, int64_t v, Rng& rng) {
  Tensor t = Tensor::empty({n}, DType::i32);
  for (int64_t i = 0; i < n; ++i) t.data<int32_t>()[i] = i % 7 == 3 ? -1 : static_cast<int32_t>(rng.next_u64() % v);
  return t;
}

TEST_P(GpuLinear, LmHeadCrossEntropy) {
  const DType dt = GetParam();
  Rng rng(3);
  struct Case {
    int64_t n, d, v;
    cuda::LmHeadTiling tiling;  // {0, 0}: the op's default
  };
  for (const Case c : {Case{1, 8, 5, {0, 0}}, Case{50, 32, 300, {0, 0}}, Case{300, 64, 1000, {128, 256}},
                       Case{129, 48, 777, {64, 1000}}, Case{257, 40, 513, {300, 100}}}) {
    const Tensor x = random_values({c.n, c.d}, dt, rng, -2, 2), w = random_values({c.v, c.d}, dt, rng, -1, 1);
    const Tensor targets = targets_for(c.n, c.v, rng), dw0 = random_values({c.v, c.d}, dt, rng, -1e-3, 1e-3);
    const double scale = 1.0 / c.n;
    Tensor dx = Tensor::empty({c.n, c.d}, DType::f64), dw = dw0.clone();
    const double loss = ops::lm_head_cross_entropy(x, w, targets, scale, dx, dw);

    Tensor gx = to_device(x, dt), gw = to_device(w, dt), gt = to_device(targets, DType::i32);
    Tensor gdx = device_empty({c.n, c.d}, dt), gdw = to_device(dw0, dt);
    const cuda::LmHeadTiling tiling = c.tiling.rows ? c.tiling : cuda::lm_head_default_tiling(c.n, c.v);
    const double gloss = cuda::lm_head_cross_entropy(gx, gw, gt, scale, gdx, gdw, tiling);
    EXPECT_NEAR(gloss, loss, 1e-5 * std::abs(loss)) << "tiling " << tiling.rows << " × " << tiling.vocab;
    EXPECT_TRUE(assert_close("dx", dx, to_host(gdx), tolerance(dt)));
    EXPECT_TRUE(assert_close("dweight", dw, to_host(gdw), tolerance(dt)));

    // Through ops::, loss only.
    EXPECT_NEAR(ops::lm_head_cross_entropy(gx, gw, gt, scale, Tensor(), Tensor()), loss, 1e-5 * std::abs(loss));
  }
}

TEST_P(GpuLinear, LmHeadBadTargetIsReported) {
  const DType dt = GetParam();
  Rng rng(4);
  Tensor x = to_device(random_values({3, 4}, dt, rng), dt), w = to_device(random_values({6, 4}, dt, rng), dt);
  Tensor targets = Tensor::empty({3}, DType::i32);
  targets.data<int32_t>()[0] = 1;
  targets.data<int32_t>()[1] = 6;  // out of range
  targets.data<int32_t>()[2] = -1;
  try {
    ops::lm_head_cross_entropy(x, w, to_device(targets, DType::i32), 1.0, Tensor(), Tensor());
    ADD_FAILURE() << "no error for target 6 of a 6-entry vocabulary";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("targets: entry 1 is 6"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuLinear, ::testing::Values(DType::f32, DType::bf16), testing::dtype_test_name);

}  // namespace
}  // namespace linea
