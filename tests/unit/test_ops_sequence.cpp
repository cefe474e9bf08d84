// Ops that depend on a token's place in its sequence: RoPE and the short causal conv + SiLU:
// hand cases, sequence boundaries, backward vs finite differences in f64, f32 vs f64,
// accumulation of the conv weight gradient, and argument errors.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/ops.h"
#include "tests/testing/assert_close.h"
#include "tests/testing/kernel_test.h"

namespace linea {
namespace {

using testing::as_dtype;
using testing::assert_close;
using testing::dot;
using testing::gradient_matches;
using testing::index_tensor;
using testing::random_tensor;
using testing::throws_invalid_argument;

double silu(double a) { return a / (1 + std::exp(-a)); }

// ---- RoPE --------------------------------------------------------------------------------------

TEST(Rope, RotatesEachPairByItsAngle) {
  // Dh = 4, base 100: pairs (x0, x2) turn by θ = p, (x1, x3) by θ = p / 10. Two heads, same rotation.
  Tensor x = Tensor::empty({2, 8}, DType::f64);
  const double v[] = {1, 2, 3, 4, 1, 2, 3, 4};
  for (int row = 0; row < 2; ++row) std::copy(v, v + 8, x.data<double>() + row * 8);
  ops::rope_apply(x, index_tensor({0, 3}), 2, 100.0, false);
  const double* r0 = x.data<double>();
  for (int j = 0; j < 8; ++j) EXPECT_DOUBLE_EQ(r0[j], v[j]) << "position 0 is the identity";
  const double* r = x.data<double>() + 8;
  const double t0 = 3, t1 = 0.3;
  for (int h = 0; h < 2; ++h) {
    EXPECT_NEAR(r[4 * h + 0], 1 * std::cos(t0) - 3 * std::sin(t0), 1e-14);
    EXPECT_NEAR(r[4 * h + 2], 1 * std::sin(t0) + 3 * std::cos(t0), 1e-14);
    EXPECT_NEAR(r[4 * h + 1], 2 * std::cos(t1) - 4 * std::sin(t1), 1e-14);
    EXPECT_NEAR(r[4 * h + 3], 2 * std::sin(t1) + 4 * std::cos(t1), 1e-14);
  }
}

// A negative position is a rotation the other way: the same as the inverse at −p (no range check).
TEST(Rope, NegativePositionsRotateBackwards) {
  Rng rng(2);
  const int64_t heads = 2, dh = 8;
  Tensor x = random_tensor({3, heads * dh}, rng), y = x.clone();
  ops::rope_apply(x, index_tensor({-1, -17, -4000}), heads, 10000.0, false);
  ops::rope_apply(y, index_tensor({1, 17, 4000}), heads, 10000.0, true);
  EXPECT_TRUE(assert_close("negative positions", y, x, 0, 1e-15));
}

TEST(Rope, InverseUndoesForwardAndScoresDependOnlyOnDistance) {
  Rng rng(1);
  const int64_t heads = 2, dh = 8;
  Tensor x = random_tensor({3, heads * dh}, rng), x0 = x.clone();
  Tensor positions = index_tensor({0, 17, 4000});
  ops::rope_apply(x, positions, heads, 10000.0, false);
  ops::rope_apply(x, positions, heads, 10000.0, true);
  EXPECT_TRUE(assert_close("round trip", x0, x, 0, 1e-12));

  // ⟨rope(q, p), rope(k, s)⟩ depends on p − s only.
  Tensor q = random_tensor({1, dh}, rng), k = random_tensor({1, dh}, rng);
  auto score = [&](int32_t p, int32_t s) {
    Tensor qr = q.clone(), kr = k.clone();
    ops::rope_apply(qr, index_tensor({p}), 1, 10000.0, false);
    ops::rope_apply(kr, index_tensor({s}), 1, 10000.0, false);
    return dot(qr, kr);
  };
  EXPECT_NEAR(score(7, 2), score(105, 100), 1e-12);
  EXPECT_NEAR(score(2, 7), score(1000, 1005), 1e-12);
}

TEST(Rope, BackwardIsTheInverseRotation) {
  Rng rng(2);
  const int64_t n = 4, heads = 3, dh = 6;
  Tensor x = random_tensor({n, heads * dh}, rng), dout = random_tensor({n, heads * dh}, rng);
  Tensor positions = index_tensor({0, 1, 5, 9});
  auto loss = [&] {
    Tensor y = x.clone();
    ops::rope_apply(y, positions, heads, 500.0, false);
    return dot(y, dout);
  };
  Tensor dx = dout.clone();
  ops::rope_apply(dx, positions, heads, 500.0, true);
  EXPECT_TRUE(gradient_matches("dx", loss, x, dx));
}

TEST(Rope, F32AgreesWithF64) {
  Rng rng(3);
  const int64_t n = 64, heads = 4, dh = 32;
  Tensor x = random_tensor({n, heads * dh}, rng);
  std::vector<int32_t> pos;
  for (int64_t t = 0; t < n; ++t) pos.push_back(static_cast<int32_t>(t * 61));
  Tensor positions = index_tensor(pos);
  Tensor x64 = x.clone(), x32 = as_dtype(x, DType::f32);
  ops::rope_apply(x64, positions, heads, 10000.0, false);
  ops::rope_apply(x32, positions, heads, 10000.0, false);
  EXPECT_TRUE(assert_close("rope", x64, x32, 1e-6));
}

TEST(Rope, RejectsBadArguments) {
  Tensor x = Tensor::zeros({2, 12}, DType::f32);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::rope_apply(x, index_tensor({0, 1}), 4, 1e4, false);
      },
      {"rope_apply", "x", "even head dimension", "3"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::rope_apply(x, index_tensor({0, 1}), 5, 1e4, false);
      },
      {"rope_apply", "x", "multiple of heads"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::rope_apply(x, index_tensor({0, 1, 2}), 2, 1e4, false);
      },
      {"rope_apply", "positions", "[2]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::rope_apply(x, index_tensor({0, 1}), 2, 0.0, false);
      },
      {"rope_apply", "base"}));
}

// ---- short causal conv + SiLU ------------------------------------------------------------------

TEST(ShortConv, KnownCaseRespectsSequenceStarts) {
  // W = 3, weights (1, 2, 3): pre[t] = x[t−2] + 2 x[t−1] + 3 x[t] inside each sequence.
  const SeqLayout seqs{{0, 2, 5}};
  Tensor x = Tensor::empty({5, 1}, DType::f64);
  fill_constant(x, 1.0);
  Tensor w = Tensor::empty({1, 3}, DType::f64);
  w.data<double>()[0] = 1, w.data<double>()[1] = 2, w.data<double>()[2] = 3;
  Tensor out = Tensor::empty({5, 1}, DType::f64);
  ops::short_conv_silu_forward(out, x, w, seqs);
  const double pre[] = {3, 5, 3, 5, 6};
  for (int t = 0; t < 5; ++t) EXPECT_NEAR(out.data<double>()[t], silu(pre[t]), 1e-15) << t;
}

TEST(ShortConv, SequencesDoNotSeeEachOther) {
  Rng rng(4);
  const SeqLayout seqs{{0, 6, 13}};
  const int64_t c = 3;
  Tensor x = random_tensor({13, c}, rng), w = random_tensor({c, 4}, rng);
  Tensor before = Tensor::empty({13, c}, DType::f64), after = Tensor::empty({13, c}, DType::f64);
  ops::short_conv_silu_forward(before, x, w, seqs);
  for (int64_t i = 0; i < 6 * c; ++i) x.data<double>()[i] += 1.0;  // change all of sequence 0
  ops::short_conv_silu_forward(after, x, w, seqs);
  for (int64_t i = 6 * c; i < 13 * c; ++i) EXPECT_EQ(before.data<double>()[i], after.data<double>()[i]) << i;
  // And the gradient of sequence 1's outputs does not reach sequence 0's inputs.
  Tensor dout = Tensor::zeros({13, c}, DType::f64);
  for (int64_t i = 6 * c; i < 13 * c; ++i) dout.data<double>()[i] = 1.0;
  Tensor dx = Tensor::empty({13, c}, DType::f64), dw = Tensor::zeros({c, 4}, DType::f64);
  ops::short_conv_silu_backward(dx, dw, dout, x, w, seqs);
  for (int64_t i = 0; i < 6 * c; ++i) EXPECT_EQ(dx.data<double>()[i], 0.0) << i;
}

TEST(ShortConv, BackwardMatchesFiniteDifferencesOnPackedSequences) {
  Rng rng(5);
  // Sequences of 3, 1, 0 and 6 tokens: shorter than the kernel, a single token, an empty one.
  const SeqLayout seqs{{0, 3, 4, 4, 10}};
  const int64_t n = 10, c = 5, width = 4;
  Tensor x = random_tensor({n, c}, rng, -2, 2), w = random_tensor({c, width}, rng), dout = random_tensor({n, c}, rng);
  Tensor out = Tensor::empty({n, c}, DType::f64);
  auto loss = [&] {
    ops::short_conv_silu_forward(out, x, w, seqs);
    return dot(out, dout);
  };
  Tensor dx = random_tensor({n, c}, rng), dw = Tensor::zeros({c, width}, DType::f64);
  ops::short_conv_silu_backward(dx, dw, dout, x, w, seqs);
  EXPECT_TRUE(gradient_matches("dx", loss, x, dx));
  EXPECT_TRUE(gradient_matches("dweight", loss, w, dw));
}

// Mamba-2's conv has a bias: pre = conv(x) + b before the SiLU.
TEST(ShortConv, BiasIsAddedBeforeTheSiluAndItsGradientMatchesFiniteDifferences) {
  Rng rng(15);
  const SeqLayout seqs{{0, 3, 4, 4, 10}};
  const int64_t n = 10, c = 5, width = 4;
  Tensor x = random_tensor({n, c}, rng, -2, 2), w = random_tensor({c, width}, rng), b = random_tensor({c}, rng);
  const Tensor dout = random_tensor({n, c}, rng);
  Tensor out = Tensor::empty({n, c}, DType::f64), plain = Tensor::empty({n, c}, DType::f64);
  ops::short_conv_silu_forward(out, x, w, seqs, b);
  // Token 3 is a sequence of one: pre = w[c, W−1] x[3, c] + b[c].
  for (int64_t ch = 0; ch < c; ++ch) {
    const double pre = w.data<double>()[ch * width + width - 1] * x.data<double>()[3 * c + ch] + b.data<double>()[ch];
    EXPECT_NEAR(out.data<double>()[3 * c + ch], silu(pre), 1e-15) << ch;
  }
  auto loss = [&] {
    ops::short_conv_silu_forward(out, x, w, seqs, b);
    return dot(out, dout);
  };
  Tensor dx = Tensor::empty({n, c}, DType::f64), dw = Tensor::zeros({c, width}, DType::f64);
  Tensor db = Tensor::zeros({c}, DType::f64);
  ops::short_conv_silu_backward(dx, dw, dout, x, w, seqs, b, db);
  EXPECT_TRUE(gradient_matches("dx", loss, x, dx));
  EXPECT_TRUE(gradient_matches("dweight", loss, w, dw));
  EXPECT_TRUE(gradient_matches("dbias", loss, b, db));
  EXPECT_TRUE(throws_invalid_argument([&] { ops::short_conv_silu_backward(dx, dw, dout, x, w, seqs, b); },
                                      {"short_conv_silu_backward", "dbias"}));
}

TEST(ShortConv, F32AgreesWithF64AndWeightGradientAccumulates) {
  Rng rng(6);
  const SeqLayout seqs{{0, 100, 101, 300}};
  const int64_t n = 300, c = 24, width = 4;
  Tensor x = random_tensor({n, c}, rng), w = random_tensor({c, width}, rng, -0.5, 0.5);
  Tensor dout = random_tensor({n, c}, rng), dw_start = random_tensor({c, width}, rng);
  struct Result {
    Tensor out, dx, dw;
  };
  auto run = [&](DType dt, const Tensor& dw_initial) {
    Result r{Tensor::empty({n, c}, dt), Tensor::empty({n, c}, dt), as_dtype(dw_initial, dt)};
    Tensor xc = as_dtype(x, dt), wc = as_dtype(w, dt);
    ops::short_conv_silu_forward(r.out, xc, wc, seqs);
    ops::short_conv_silu_backward(r.dx, r.dw, as_dtype(dout, dt), xc, wc, seqs);
    return r;
  };
  const Tensor zero_dw = Tensor::zeros({c, width}, DType::f64);
  const Result r64 = run(DType::f64, zero_dw), r32 = run(DType::f32, zero_dw);
  EXPECT_TRUE(assert_close("out", r64.out, r32.out, 1e-6));
  EXPECT_TRUE(assert_close("dx", r64.dx, r32.dx, 1e-6));
  EXPECT_TRUE(assert_close("dweight", r64.dw, r32.dw, 1e-5));
  const Result acc = run(DType::f64, dw_start);
  for (int64_t i = 0; i < c * width; ++i) {
    EXPECT_NEAR(acc.dw.data<double>()[i], dw_start.data<double>()[i] + r64.dw.data<double>()[i], 1e-11);
  }
}

TEST(ShortConv, RejectsBadArguments) {
  Tensor x = Tensor::zeros({5, 3}, DType::f32), out = Tensor::zeros({5, 3}, DType::f32);
  Tensor w = Tensor::zeros({3, 4}, DType::f32);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::short_conv_silu_forward(out, x, Tensor::zeros({4, 3}, DType::f32), SeqLayout::uniform(1, 5));
      },
      {"short_conv_silu_forward", "weight", "[3, *]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::short_conv_silu_forward(out, x, Tensor::zeros({3, 0}, DType::f32), SeqLayout::uniform(1, 5));
      },
      {"short_conv_silu_forward", "weight", "width"}));
  EXPECT_TRUE(throws_invalid_argument([&] { ops::short_conv_silu_forward(out, x, w, SeqLayout::uniform(2, 3)); },
                                      {"short_conv_silu_forward", "seqs", "6", "5 tokens"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::short_conv_silu_backward(Tensor::zeros({5, 3}, DType::f32), Tensor::zeros({3, 3}, DType::f32), out, x, w,
                                      SeqLayout::uniform(1, 5));
      },
      {"short_conv_silu_backward", "dweight", "[3, 4]"}));
}

}  // namespace
}  // namespace linea
