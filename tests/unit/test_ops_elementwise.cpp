// Elementwise ops: add_inplace, SwiGLU, the scaled sigmoid gate and the Mamba-style decay gate:
// hand cases, backward vs finite differences in f64, f32 vs f64, accumulation of parameter
// gradients, stability at large inputs, and argument errors. Also the row copies by index
// (copy_rows) of the decoding states.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "tests/testing/assert_close.h"
#include "tests/testing/kernel_test.h"

namespace linea {
namespace {

using testing::as_dtype;
using testing::assert_close;
using testing::dot;
using testing::gradient_matches;
using testing::random_tensor;
using testing::throws_invalid_argument;

double sigmoid(double a) { return 1 / (1 + std::exp(-a)); }

// ---- add_inplace -------------------------------------------------------------------------------

TEST(AddInplace, AddsElementwiseInAnyRank) {
  Rng rng(1);
  Tensor y = random_tensor({2, 3, 4}, rng), x = random_tensor({2, 3, 4}, rng), y0 = y.clone();
  ops::add_inplace(y, x);
  for (int64_t i = 0; i < y.numel(); ++i) {
    EXPECT_EQ(y.data<double>()[i], y0.data<double>()[i] + x.data<double>()[i]);
  }
  Tensor yf = as_dtype(y0, DType::f32);
  ops::add_inplace(yf, as_dtype(x, DType::f32));
  EXPECT_TRUE(assert_close("y f32", y, yf, 1e-6));
}

TEST(AddInplace, RejectsBadArguments) {
  Tensor y = Tensor::zeros({2, 3}, DType::f32);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::add_inplace(y, Tensor::zeros({3, 2}, DType::f32));
      },
      {"add_inplace", "x", "[2, 3]", "[3, 2]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::add_inplace(y, Tensor::zeros({2, 3}, DType::f64));
      },
      {"add_inplace", "x", "f32 (like y)"}));
  EXPECT_TRUE(throws_invalid_argument([&] { ops::add_inplace(Tensor(), y); }, {"add_inplace", "y", "undefined"}));
}

// ---- SwiGLU ------------------------------------------------------------------------------------

TEST(SwiGlu, KnownValues) {
  Tensor gate = Tensor::empty({1, 3}, DType::f64), up = Tensor::empty({1, 3}, DType::f64);
  double* g = gate.data<double>();
  double* u = up.data<double>();
  g[0] = 0, g[1] = 1, g[2] = -2;
  u[0] = 5, u[1] = 2, u[2] = 3;
  Tensor out = Tensor::empty({1, 3}, DType::f64);
  ops::swiglu_forward(out, gate, up);
  EXPECT_DOUBLE_EQ(out.data<double>()[0], 0.0);
  EXPECT_NEAR(out.data<double>()[1], 1 * sigmoid(1) * 2, 1e-15);
  EXPECT_NEAR(out.data<double>()[2], -2 * sigmoid(-2) * 3, 1e-15);
}

TEST(SwiGlu, BackwardMatchesFiniteDifferences) {
  Rng rng(2);
  const Shape shape{5, 9};
  Tensor gate = random_tensor(shape, rng, -4, 4), up = random_tensor(shape, rng), dout = random_tensor(shape, rng);
  Tensor out = Tensor::empty(shape, DType::f64);
  auto loss = [&] {
    ops::swiglu_forward(out, gate, up);
    return dot(out, dout);
  };
  Tensor dgate = Tensor::empty(shape, DType::f64), dup = Tensor::empty(shape, DType::f64);
  ops::swiglu_backward(dgate, dup, dout, gate, up);
  EXPECT_TRUE(gradient_matches("dgate", loss, gate, dgate));
  EXPECT_TRUE(gradient_matches("dup", loss, up, dup));
}

TEST(SwiGlu, F32AgreesWithF64AndLargeInputsStayFinite) {
  Rng rng(3);
  const Shape shape{64, 96};
  Tensor gate = random_tensor(shape, rng, -6, 6), up = random_tensor(shape, rng), dout = random_tensor(shape, rng);
  gate.data<double>()[0] = 200;   // silu(200) = 200, silu'(200) = 1
  gate.data<double>()[1] = -200;  // silu(−200) ≈ 0, silu'(−200) ≈ 0
  Tensor results[2][3];
  for (int p = 0; p < 2; ++p) {
    const DType dt = p ? DType::f32 : DType::f64;
    Tensor g = as_dtype(gate, dt), u = as_dtype(up, dt), d = as_dtype(dout, dt);
    results[p][0] = Tensor::empty(shape, dt);
    results[p][1] = Tensor::empty(shape, dt);
    results[p][2] = Tensor::empty(shape, dt);
    ops::swiglu_forward(results[p][0], g, u);
    ops::swiglu_backward(results[p][1], results[p][2], d, g, u);
  }
  EXPECT_TRUE(assert_close("out", results[0][0], results[1][0], 1e-6));
  EXPECT_TRUE(assert_close("dgate", results[0][1], results[1][1], 1e-6));
  EXPECT_TRUE(assert_close("dup", results[0][2], results[1][2], 1e-6));
  EXPECT_DOUBLE_EQ(results[0][0].data<double>()[0], 200 * up.data<double>()[0]);
  EXPECT_NEAR(results[0][1].data<double>()[0], dout.data<double>()[0] * up.data<double>()[0], 1e-12);
  EXPECT_NEAR(results[0][0].data<double>()[1], 0.0, 1e-80);
}

// The fused backward that also writes the product: swiglu_forward and swiglu_backward, bit for bit
// (f32 and f64, sizes that leave vector remainders), into separate outputs and with the product
// over dout (as SwiGLUMLP's backward writes h over dh).
TEST(SwiGlu, BackwardWithProductIsForwardAndBackward) {
  for (DType dt : {DType::f32, DType::f64}) {
    for (const Shape& shape : {Shape{1, 1}, Shape{3, 13}, Shape{129, 96}, Shape{70, 1031}}) {
      Rng rng(4);
      const Tensor gate = as_dtype(random_tensor(shape, rng, -6, 6), dt), up = as_dtype(random_tensor(shape, rng), dt);
      const Tensor dout = as_dtype(random_tensor(shape, rng), dt);
      Tensor out = Tensor::empty(shape, dt), dgate = Tensor::empty(shape, dt), dup = Tensor::empty(shape, dt);
      ops::swiglu_forward(out, gate, up);
      ops::swiglu_backward(dgate, dup, dout, gate, up);
      const testing::NamedTensors expected = {{"out", out}, {"dgate", dgate}, {"dup", dup}};
      Tensor f_out = Tensor::empty(shape, dt), f_dgate = Tensor::empty(shape, dt), f_dup = Tensor::empty(shape, dt);
      ops::swiglu_backward_with_product(f_dgate, f_dup, f_out, dout, gate, up);
      const std::string what =
          std::string(dtype_name(dt)) + " " + std::to_string(shape[0]) + "x" + std::to_string(shape[1]);
      testing::expect_same_bits(expected, {{"out", f_out}, {"dgate", f_dgate}, {"dup", f_dup}}, what);
      Tensor over = dout.clone();
      ops::swiglu_backward_with_product(f_dgate, f_dup, over, over, gate, up);
      testing::expect_same_bits(expected, {{"out", over}, {"dgate", f_dgate}, {"dup", f_dup}}, what + " over dout");
    }
  }
  Tensor a = Tensor::zeros({2, 4}, DType::f32);
  EXPECT_TRUE(throws_invalid_argument([&] { ops::swiglu_backward_with_product(a, a, Tensor(), a, a, a); },
                                      {"swiglu_backward_with_product", "out", "undefined"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::swiglu_backward_with_product(a, a, Tensor::zeros({2, 5}, DType::f32), a, a, a);
      },
      {"swiglu_backward_with_product", "out", "[2, 4]"}));
}

TEST(SwiGlu, RejectsBadArguments) {
  Tensor a = Tensor::zeros({2, 4}, DType::f32);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::swiglu_forward(a, a, Tensor::zeros({2, 5}, DType::f32));
      },
      {"swiglu_forward", "up", "[2, 4]"}));
  EXPECT_TRUE(throws_invalid_argument([&] { ops::swiglu_backward(a, Tensor(), a, a, a); },
                                      {"swiglu_backward", "dup", "undefined"}));
}

// ---- sigmoid gate ------------------------------------------------------------------------------

TEST(SigmoidGate, KnownValuesAndSaturation) {
  Tensor logits = Tensor::empty({4}, DType::f64);
  double* l = logits.data<double>();
  l[0] = 0, l[1] = std::log(3.0), l[2] = 800, l[3] = -800;
  Tensor beta = Tensor::empty({4}, DType::f64);
  ops::sigmoid_gate_forward(beta, logits, 2.0);
  EXPECT_DOUBLE_EQ(beta.data<double>()[0], 1.0);
  EXPECT_NEAR(beta.data<double>()[1], 1.5, 1e-15);
  EXPECT_EQ(beta.data<double>()[2], 2.0);
  EXPECT_EQ(beta.data<double>()[3], 0.0);
}

TEST(SigmoidGate, BackwardMatchesFiniteDifferencesForBothScales) {
  for (double scale : {1.0, 2.0}) {
    Rng rng(4);
    Tensor logits = random_tensor({6, 4}, rng, -5, 5), dbeta = random_tensor({6, 4}, rng);
    Tensor beta = Tensor::empty({6, 4}, DType::f64);
    auto loss = [&] {
      ops::sigmoid_gate_forward(beta, logits, scale);
      return dot(beta, dbeta);
    };
    loss();
    Tensor dlogits = Tensor::empty({6, 4}, DType::f64);
    ops::sigmoid_gate_backward(dlogits, dbeta, beta, scale);
    EXPECT_TRUE(gradient_matches("dlogits, scale " + std::to_string(scale), loss, logits, dlogits));
  }
}

TEST(SigmoidGate, F32AgreesWithF64) {
  Rng rng(5);
  Tensor logits = random_tensor({128, 16}, rng, -8, 8), dbeta = random_tensor({128, 16}, rng);
  Tensor beta[2], dlogits[2];
  for (int p = 0; p < 2; ++p) {
    const DType dt = p ? DType::f32 : DType::f64;
    beta[p] = Tensor::empty({128, 16}, dt);
    dlogits[p] = Tensor::empty({128, 16}, dt);
    ops::sigmoid_gate_forward(beta[p], as_dtype(logits, dt), 2.0);
    ops::sigmoid_gate_backward(dlogits[p], as_dtype(dbeta, dt), beta[p], 2.0);
  }
  EXPECT_TRUE(assert_close("beta", beta[0], beta[1], 1e-6));
  EXPECT_TRUE(assert_close("dlogits", dlogits[0], dlogits[1], 1e-5));
}

TEST(SigmoidGate, RejectsBadArguments) {
  Tensor a = Tensor::zeros({3, 2}, DType::f64);
  EXPECT_TRUE(
      throws_invalid_argument([&] { ops::sigmoid_gate_forward(a, a, 0.0); }, {"sigmoid_gate_forward", "scale"}));
  EXPECT_TRUE(throws_invalid_argument([&] { ops::sigmoid_gate_forward(Tensor::zeros({3}, DType::f64), a, 1.0); },
                                      {"sigmoid_gate_forward", "beta", "[3, 2]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::sigmoid_gate_backward(a, Tensor::zeros({3, 2}, DType::f32), a, 1.0);
      },
      {"sigmoid_gate_backward", "dbeta", "f64"}));
}

// ---- decay gate --------------------------------------------------------------------------------

TEST(DecayGate, KnownValuesPerHead) {
  // H = 2, c = 2, a + dt_bias = 0 → softplus = log 2; A_log = (0, log 3) → g = −(1, 1, 3, 3)·log 2.
  Tensor a = Tensor::zeros({1, 4}, DType::f64), dt_bias = Tensor::zeros({4}, DType::f64);
  Tensor A_log = Tensor::empty({2}, DType::f64);
  A_log.data<double>()[0] = 0;
  A_log.data<double>()[1] = std::log(3.0);
  Tensor g = Tensor::empty({1, 4}, DType::f64);
  ops::decay_gate_forward(g, a, A_log, dt_bias);
  const double l2 = std::log(2.0);
  EXPECT_DOUBLE_EQ(g.data<double>()[0], -l2);
  EXPECT_DOUBLE_EQ(g.data<double>()[1], -l2);
  EXPECT_NEAR(g.data<double>()[2], -3 * l2, 1e-15);
  EXPECT_NEAR(g.data<double>()[3], -3 * l2, 1e-15);
}

TEST(DecayGate, LargeInputsStayFiniteAndNonPositive) {
  Tensor a = Tensor::empty({1, 2}, DType::f32), dt_bias = Tensor::zeros({2}, DType::f32);
  a.data<float>()[0] = 100;
  a.data<float>()[1] = -100;
  Tensor A_log = Tensor::zeros({1}, DType::f32), g = Tensor::empty({1, 2}, DType::f32);
  ops::decay_gate_forward(g, a, A_log, dt_bias);
  EXPECT_FLOAT_EQ(g.data<float>()[0], -100.0f);
  EXPECT_LE(g.data<float>()[1], 0.0f);
  EXPECT_GT(g.data<float>()[1], -1e-40f);
}

class DecayGateByLayout : public ::testing::TestWithParam<int64_t> {};  // decays per head: 1 (GDN), d_k (KDA)

TEST_P(DecayGateByLayout, BackwardMatchesFiniteDifferences) {
  const int64_t n = 5, heads = 3, per_head = GetParam(), width = heads * per_head;
  Rng rng(6);
  Tensor a = random_tensor({n, width}, rng, -3, 3), A_log = random_tensor({heads}, rng, -1, 2);
  Tensor dt_bias = random_tensor({width}, rng, -2, 1), dg = random_tensor({n, width}, rng);
  Tensor g = Tensor::empty({n, width}, DType::f64);
  auto loss = [&] {
    ops::decay_gate_forward(g, a, A_log, dt_bias);
    return dot(g, dg);
  };
  Tensor da = Tensor::empty({n, width}, DType::f64), dA_log = Tensor::zeros({heads}, DType::f64);
  Tensor ddt_bias = Tensor::zeros({width}, DType::f64);
  ops::decay_gate_backward(da, dA_log, ddt_bias, dg, a, A_log, dt_bias);
  EXPECT_TRUE(gradient_matches("da", loss, a, da));
  EXPECT_TRUE(gradient_matches("dA_log", loss, A_log, dA_log));
  EXPECT_TRUE(gradient_matches("ddt_bias", loss, dt_bias, ddt_bias));
}

TEST_P(DecayGateByLayout, F32AgreesWithF64AndParameterGradientsAccumulate) {
  const int64_t n = 300, heads = 4, per_head = GetParam(), width = heads * per_head;
  Rng rng(7);
  Tensor a = random_tensor({n, width}, rng, -3, 3), A_log = random_tensor({heads}, rng, -1, 2);
  Tensor dt_bias = random_tensor({width}, rng, -2, 1), dg = random_tensor({n, width}, rng);
  Tensor dA_start = random_tensor({heads}, rng), ddt_start = random_tensor({width}, rng);
  struct Result {
    Tensor g, da, dA_log, ddt_bias;
  };
  auto run = [&](DType dt, const Tensor& dA_initial, const Tensor& ddt_initial) {
    Result r{Tensor::empty({n, width}, dt), Tensor::empty({n, width}, dt), as_dtype(dA_initial, dt),
             as_dtype(ddt_initial, dt)};
    Tensor ac = as_dtype(a, dt), Ac = as_dtype(A_log, dt), bc = as_dtype(dt_bias, dt);
    ops::decay_gate_forward(r.g, ac, Ac, bc);
    ops::decay_gate_backward(r.da, r.dA_log, r.ddt_bias, as_dtype(dg, dt), ac, Ac, bc);
    return r;
  };
  const Tensor zero_dA = Tensor::zeros({heads}, DType::f64), zero_ddt = Tensor::zeros({width}, DType::f64);
  const Result r64 = run(DType::f64, zero_dA, zero_ddt), r32 = run(DType::f32, zero_dA, zero_ddt);
  EXPECT_TRUE(assert_close("g", r64.g, r32.g, 1e-6));
  EXPECT_TRUE(assert_close("da", r64.da, r32.da, 1e-6));
  EXPECT_TRUE(assert_close("dA_log", r64.dA_log, r32.dA_log, 1e-5));
  EXPECT_TRUE(assert_close("ddt_bias", r64.ddt_bias, r32.ddt_bias, 1e-5));
  const Result acc = run(DType::f64, dA_start, ddt_start);
  for (int64_t h = 0; h < heads; ++h) {
    EXPECT_NEAR(acc.dA_log.data<double>()[h], dA_start.data<double>()[h] + r64.dA_log.data<double>()[h], 1e-10);
  }
  for (int64_t k = 0; k < width; ++k) {
    EXPECT_NEAR(acc.ddt_bias.data<double>()[k], ddt_start.data<double>()[k] + r64.ddt_bias.data<double>()[k], 1e-10);
  }
}

INSTANTIATE_TEST_SUITE_P(DecaysPerHead, DecayGateByLayout, ::testing::Values(1, 6));

TEST(DecayGate, RejectsBadArguments) {
  Tensor a = Tensor::zeros({2, 6}, DType::f64), g = Tensor::zeros({2, 6}, DType::f64);
  Tensor A_log = Tensor::zeros({4}, DType::f64), dt_bias = Tensor::zeros({6}, DType::f64);
  EXPECT_TRUE(throws_invalid_argument([&] { ops::decay_gate_forward(g, a, A_log, dt_bias); },
                                      {"decay_gate_forward", "a", "not a multiple", "A_log"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { ops::decay_gate_forward(g, a, Tensor::zeros({3}, DType::f64), Tensor::zeros({3}, DType::f64)); },
      {"decay_gate_forward", "dt_bias", "[6]", "[3]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::decay_gate_backward(g, Tensor::zeros({2}, DType::f64), Tensor::zeros({6}, DType::f64), g, a,
                                 Tensor::zeros({3}, DType::f64), dt_bias);
      },
      {"decay_gate_backward", "dA_log", "[3]"}));
}

// ---- copy_rows ---------------------------------------------------------------------------------

Tensor row_pairs(const std::vector<int32_t>& pairs) {
  Tensor t = Tensor::empty({static_cast<int64_t>(pairs.size() / 2), 2}, DType::i32);
  std::copy(pairs.begin(), pairs.end(), t.data<int32_t>());
  return t;
}

TEST(CopyRows, MovesTheNamedRowsAndLeavesTheOthers) {
  Rng rng(21);
  const Tensor in = random_tensor({4, 3}, rng);
  Tensor out = Tensor::zeros({5, 3}, DType::f64);
  ops::copy_rows(out, in, row_pairs({4, 0, 0, 3, 2, 3}));  // out[4] = in[0], out[0] = in[3], out[2] = in[3]
  for (int64_t c = 0; c < 3; ++c) {
    EXPECT_EQ(out.data<double>()[4 * 3 + c], in.data<double>()[c]);
    EXPECT_EQ(out.data<double>()[c], in.data<double>()[3 * 3 + c]);
    EXPECT_EQ(out.data<double>()[2 * 3 + c], in.data<double>()[3 * 3 + c]);
    EXPECT_EQ(out.data<double>()[1 * 3 + c], 0.0);
    EXPECT_EQ(out.data<double>()[3 * 3 + c], 0.0);
  }
}

TEST(CopyRows, RejectsBadPairs) {
  Tensor in = Tensor::zeros({4, 3}, DType::f64), out = Tensor::zeros({5, 3}, DType::f64);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::copy_rows(out, in, row_pairs({5, 0}));
      },
      {"copy_rows", "rows", "pair 0 (5, 0)", "outside"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::copy_rows(out, in, row_pairs({1, 0, 1, 2}));
      },
      {"copy_rows", "row 1 of out is written twice", "pair 1"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::copy_rows(in, in, row_pairs({1, 0}));
      },
      {"copy_rows", "out", "must not overlap in"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::copy_rows(out, in, Tensor::zeros({1, 3}, DType::i32));
      },
      {"copy_rows", "rows", "[P, 2]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::copy_rows(Tensor::zeros({5, 2}, DType::f64), in, row_pairs({0, 0}));
      },
      {"copy_rows", "out", "[*, 3]"}));
}

}  // namespace
}  // namespace linea
