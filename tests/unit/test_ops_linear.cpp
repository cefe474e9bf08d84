// Ops that multiply by weight matrices or index them: linear, embedding and the fused LM head +
// cross-entropy: hand cases, backward vs finite differences in f64, f32 vs f64, accumulation of
// parameter gradients, independence of the row blocking, stability, and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/lm_head_cross_entropy.h"
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
using testing::values;

// ---- linear ------------------------------------------------------------------------------------

TEST(Linear, KnownProduct) {
  Tensor x = values({2, 2}, {1, 2, -1, 3});
  Tensor w = values({3, 2}, {1, 0, 0, 1, 1, 1}), b = values({3}, {0.5, 0, -1});
  Tensor out = Tensor::empty({2, 3}, DType::f64);
  ops::linear_forward(out, x, w, b);
  const std::vector<double> expected{1.5, 2, 2, -0.5, 3, 1};
  for (int i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(out.data<double>()[i], expected[i]) << i;
  ops::linear_forward(out, x, w, Tensor());
  EXPECT_DOUBLE_EQ(out.data<double>()[0], 1.0);
}

TEST(Linear, BackwardMatchesFiniteDifferences) {
  Rng rng(1);
  const int64_t n = 6, in = 5, o = 4;
  Tensor x = random_tensor({n, in}, rng), w = random_tensor({o, in}, rng), b = random_tensor({o}, rng);
  Tensor dout = random_tensor({n, o}, rng), out = Tensor::empty({n, o}, DType::f64);
  auto loss = [&] {
    ops::linear_forward(out, x, w, b);
    return dot(out, dout);
  };
  Tensor dx = random_tensor({n, in}, rng), dw = Tensor::zeros({o, in}, DType::f64), db = Tensor::zeros({o}, DType::f64);
  ops::linear_backward(dx, dw, db, dout, x, w, false);
  EXPECT_TRUE(gradient_matches("dx", loss, x, dx));
  EXPECT_TRUE(gradient_matches("dweight", loss, w, dw));
  EXPECT_TRUE(gradient_matches("dbias", loss, b, db));
}

TEST(Linear, GradientsAccumulateAndCanBeSkipped) {
  Rng rng(2);
  const int64_t n = 300, in = 7, o = 5;  // several row blocks for dbias
  Tensor x = random_tensor({n, in}, rng), w = random_tensor({o, in}, rng), dout = random_tensor({n, o}, rng);
  Tensor dx = Tensor::empty({n, in}, DType::f64), dw = Tensor::zeros({o, in}, DType::f64);
  Tensor db = Tensor::zeros({o}, DType::f64);
  ops::linear_backward(dx, dw, db, dout, x, w, false);

  Tensor dx_acc = random_tensor({n, in}, rng), dw_acc = random_tensor({o, in}, rng), db_acc = random_tensor({o}, rng);
  const Tensor dx0 = dx_acc.clone(), dw0 = dw_acc.clone(), db0 = db_acc.clone();
  ops::linear_backward(dx_acc, dw_acc, db_acc, dout, x, w, true);
  auto expect_sum = [](const char* what, const Tensor& got, const Tensor& start, const Tensor& fresh) {
    for (int64_t i = 0; i < got.numel(); ++i) {
      EXPECT_NEAR(got.data<double>()[i], start.data<double>()[i] + fresh.data<double>()[i], 1e-11) << what << i;
    }
  };
  expect_sum("dx", dx_acc, dx0, dx);
  expect_sum("dweight", dw_acc, dw0, dw);
  expect_sum("dbias", db_acc, db0, db);

  Tensor dw_only = Tensor::zeros({o, in}, DType::f64);
  ops::linear_backward(Tensor(), dw_only, Tensor(), dout, x, w, false);
  EXPECT_TRUE(assert_close("dweight alone", dw, dw_only, 0, 0));
}

TEST(Linear, F32AgreesWithF64) {
  Rng rng(3);
  const int64_t n = 40, in = 64, o = 48;
  Tensor x = random_tensor({n, in}, rng), w = random_tensor({o, in}, rng), b = random_tensor({o}, rng);
  Tensor dout = random_tensor({n, o}, rng);
  Tensor r[2][4];
  for (int p = 0; p < 2; ++p) {
    const DType dt = p ? DType::f32 : DType::f64;
    Tensor xc = as_dtype(x, dt), wc = as_dtype(w, dt);
    r[p][0] = Tensor::empty({n, o}, dt);
    r[p][1] = Tensor::empty({n, in}, dt);
    r[p][2] = Tensor::zeros({o, in}, dt);
    r[p][3] = Tensor::zeros({o}, dt);
    ops::linear_forward(r[p][0], xc, wc, as_dtype(b, dt));
    ops::linear_backward(r[p][1], r[p][2], r[p][3], as_dtype(dout, dt), xc, wc, false);
  }
  const char* names[] = {"out", "dx", "dweight", "dbias"};
  for (int k = 0; k < 4; ++k) EXPECT_TRUE(assert_close(names[k], r[0][k], r[1][k], 1e-6));
}

TEST(Linear, EmptyBatchLeavesParameterGradientsUnchanged) {
  Rng rng(10);
  Tensor x = Tensor::empty({0, 3}, DType::f32), w = as_dtype(random_tensor({4, 3}, rng), DType::f32);
  Tensor dw = as_dtype(random_tensor({4, 3}, rng), DType::f32), dw0 = dw.clone(), db = Tensor::zeros({4}, DType::f32);
  ops::linear_forward(Tensor::empty({0, 4}, DType::f32), x, w, Tensor());
  ops::linear_backward(Tensor::empty({0, 3}, DType::f32), dw, db, Tensor::empty({0, 4}, DType::f32), x, w, false);
  EXPECT_TRUE(assert_close("dweight", dw0, dw, 0, 0));
  EXPECT_EQ(
      ops::lm_head_cross_entropy(x, w, Tensor::empty({0}, DType::i32), 1.0, Tensor::empty({0, 3}, DType::f32), dw),
      0.0);
  EXPECT_TRUE(assert_close("dweight after cross-entropy", dw0, dw, 0, 0));
}

TEST(Linear, RejectsBadArguments) {
  Tensor x = Tensor::zeros({2, 3}, DType::f32), w = Tensor::zeros({4, 3}, DType::f32);
  Tensor out = Tensor::zeros({2, 4}, DType::f32);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::linear_forward(out, x, Tensor::zeros({4, 2}, DType::f32), Tensor());
      },
      {"linear_forward", "weight", "[*, 3]", "[4, 2]"}));
  EXPECT_TRUE(throws_invalid_argument([&] { ops::linear_forward(out, x, w, Tensor::zeros({3}, DType::f32)); },
                                      {"linear_forward", "bias", "[4]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::linear_forward(Tensor::zeros({2, 3}, DType::f32), x, w, Tensor());
      },
      {"linear_forward", "out", "[2, 4]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::linear_backward(Tensor::zeros({3, 2}, DType::f32), Tensor(), Tensor(), out, x, w, false);
      },
      {"linear_backward", "dx", "[2, 3]"}));
}

// ---- embedding ---------------------------------------------------------------------------------

TEST(Embedding, GathersRowsAndScattersGradients) {
  Tensor table = values({3, 2}, {0, 1, 10, 11, 20, 21});
  Tensor ids = index_tensor({2, 0, 2});
  Tensor out = Tensor::empty({3, 2}, DType::f64);
  ops::embedding_forward(out, table, ids);
  const std::vector<double> expected{20, 21, 0, 1, 20, 21};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out.data<double>()[i], expected[i]);

  // Repeated ids add up, and the table gradient accumulates onto what is there.
  Tensor dout = values({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor dtable = values({3, 2}, {100, 100, 100, 100, 100, 100});
  ops::embedding_backward(dtable, dout, ids);
  const std::vector<double> grad{103, 104, 100, 100, 106, 108};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(dtable.data<double>()[i], grad[i]);
}

TEST(Embedding, BackwardMatchesFiniteDifferencesAndF32) {
  Rng rng(4);
  const int64_t v = 7, d = 130, n = 40;  // d spans several column slices
  std::vector<int32_t> id_values;
  for (int64_t t = 0; t < n; ++t) id_values.push_back(static_cast<int32_t>((t * 5) % v));
  Tensor ids = index_tensor(id_values);
  Tensor table = random_tensor({v, d}, rng), dout = random_tensor({n, d}, rng);
  Tensor out = Tensor::empty({n, d}, DType::f64);
  auto loss = [&] {
    ops::embedding_forward(out, table, ids);
    return dot(out, dout);
  };
  Tensor dtable = Tensor::zeros({v, d}, DType::f64);
  ops::embedding_backward(dtable, dout, ids);
  EXPECT_TRUE(gradient_matches("dtable", loss, table, dtable));
  Tensor dtable32 = Tensor::zeros({v, d}, DType::f32);
  ops::embedding_backward(dtable32, as_dtype(dout, DType::f32), ids);
  EXPECT_TRUE(assert_close("dtable f32", dtable, dtable32, 1e-6));
}

TEST(Embedding, RejectsBadIdsWithoutWriting) {
  Tensor table = Tensor::zeros({4, 2}, DType::f32);
  Tensor out = Tensor::empty({2, 2}, DType::f32);
  fill_constant(out, 7.0);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::embedding_forward(out, table, index_tensor({1, 4}));
      },
      {"embedding_forward", "ids", "entry 1", "4", "[0, 4)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::embedding_forward(out, table, index_tensor({-1, 0}));
      },
      {"embedding_forward", "ids", "entry 0", "-1"}));
  EXPECT_EQ(out.data<float>()[0], 7.0f);
  Tensor ids64 = Tensor::zeros({2}, DType::i64);
  EXPECT_TRUE(
      throws_invalid_argument([&] { ops::embedding_forward(out, table, ids64); }, {"embedding_forward", "ids", "i32"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::embedding_backward(table, Tensor::zeros({2, 3}, DType::f32), index_tensor({0, 1}));
      },
      {"embedding_backward", "dout", "[2, 2]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::embedding_backward(table, Tensor::zeros({2, 2}, DType::f32), index_tensor({0, 9}));
      },
      {"embedding_backward", "ids", "9"}));
  EXPECT_EQ(table.data<float>()[0], 0.0f);
}

// ---- LM head + cross-entropy -------------------------------------------------------------------

// The unfused definition, in f64, for comparison: Σ_n (logsumexp(x_n·Wᵀ) − x_n·W[target_n]).
double unfused_cross_entropy(const Tensor& x, const Tensor& w, const std::vector<int32_t>& targets) {
  const int64_t n = x.dim(0), d = x.dim(1), v = w.dim(0);
  double total = 0;
  for (int64_t t = 0; t < n; ++t) {
    if (targets[t] < 0) continue;
    std::vector<double> logits(static_cast<size_t>(v));
    for (int64_t j = 0; j < v; ++j) {
      for (int64_t k = 0; k < d; ++k) logits[j] += x.data<double>()[t * d + k] * w.data<double>()[j * d + k];
    }
    double sum = 0;
    for (double l : logits) sum += std::exp(l);
    total += std::log(sum) - logits[targets[t]];
  }
  return total;
}

TEST(LmHeadCrossEntropy, ZeroLogitsGiveLogVocabAndIgnoredRowsCountNothing) {
  const int64_t n = 5, d = 3, v = 11;
  Rng rng(5);
  Tensor x = random_tensor({n, d}, rng), w = Tensor::zeros({v, d}, DType::f64);
  const double loss = ops::lm_head_cross_entropy(x, w, index_tensor({3, -1, 0, 10, -1}), 1.0, Tensor(), Tensor());
  EXPECT_NEAR(loss, 3 * std::log(static_cast<double>(v)), 1e-12);
  // Ignored rows get no gradient.
  Tensor dx = random_tensor({n, d}, rng), dw = Tensor::zeros({v, d}, DType::f64);
  Tensor w1 = random_tensor({v, d}, rng);
  ops::lm_head_cross_entropy(x, w1, index_tensor({3, -1, 0, 10, -1}), 1.0, dx, dw);
  for (int64_t k = 0; k < d; ++k) {
    EXPECT_EQ(dx.data<double>()[1 * d + k], 0.0);
    EXPECT_EQ(dx.data<double>()[4 * d + k], 0.0);
  }
  EXPECT_EQ(ops::lm_head_cross_entropy(x, w1, index_tensor({-1, -1, -1, -1, -1}), 1.0, Tensor(), Tensor()), 0.0);
}

TEST(LmHeadCrossEntropy, KnownTwoClassCase) {
  // logits = (1, −1), target 0: loss = log(1 + e^{−2}); dlogits = (σ(1)−1 ... ) = (−e^{−2}/(1+e^{−2}),
  // e^{−2}/(1+e^{−2})).
  Tensor x = values({1, 1}, {1}), w = values({2, 1}, {1, -1});
  Tensor dx = Tensor::empty({1, 1}, DType::f64), dw = Tensor::zeros({2, 1}, DType::f64);
  const double loss = ops::lm_head_cross_entropy(x, w, index_tensor({0}), 1.0, dx, dw);
  const double p1 = std::exp(-2.0) / (1 + std::exp(-2.0));
  EXPECT_NEAR(loss, std::log1p(std::exp(-2.0)), 1e-15);
  EXPECT_NEAR(dw.data<double>()[0], -p1, 1e-15);       // dlogits_0 · x
  EXPECT_NEAR(dw.data<double>()[1], p1, 1e-15);        // dlogits_1 · x
  EXPECT_NEAR(dx.data<double>()[0], -p1 - p1, 1e-15);  // Σ_j dlogits_j · W_j
}

TEST(LmHeadCrossEntropy, MatchesUnfusedDefinitionAndFiniteDifferences) {
  Rng rng(6);
  const int64_t n = 7, d = 5, v = 13;
  const std::vector<int32_t> target_values{4, 12, -1, 0, 7, 7, -1};
  Tensor targets = index_tensor(target_values);
  Tensor x = random_tensor({n, d}, rng, -2, 2), w = random_tensor({v, d}, rng, -2, 2);
  const double scale = 1.0 / 5;  // mean over the 5 counted rows
  EXPECT_NEAR(ops::lm_head_cross_entropy(x, w, targets, scale, Tensor(), Tensor()),
              unfused_cross_entropy(x, w, target_values), 1e-12);
  auto loss = [&] { return scale * ops::lm_head_cross_entropy(x, w, targets, scale, Tensor(), Tensor()); };
  Tensor dx = random_tensor({n, d}, rng), dw = Tensor::zeros({v, d}, DType::f64);
  ops::lm_head_cross_entropy(x, w, targets, scale, dx, dw);
  EXPECT_TRUE(gradient_matches("dx", loss, x, dx));
  EXPECT_TRUE(gradient_matches("dweight", loss, w, dw));
}

TEST(LmHeadCrossEntropy, ResultDoesNotDependOnRowBlocking) {
  Rng rng(7);
  const int64_t n = 10, d = 6, v = 9;
  std::vector<int32_t> targets;
  for (int64_t t = 0; t < n; ++t) targets.push_back(t == 4 ? -1 : static_cast<int32_t>((t * 3) % v));
  Tensor x = random_tensor({n, d}, rng), w = random_tensor({v, d}, rng);
  auto run = [&](int64_t rows_per_block, Tensor& dx, Tensor& dw) {
    dx = Tensor::empty({n, d}, DType::f64);
    dw = Tensor::zeros({v, d}, DType::f64);
    return cpu::lm_head_cross_entropy<double>(x.data<double>(), w.data<double>(), targets.data(), n, d, v, 0.5,
                                              dx.data<double>(), dw.data<double>(), rows_per_block);
  };
  Tensor dx_all, dw_all;
  const double loss_all = run(n, dx_all, dw_all);
  for (int64_t rows : {1, 3, 4}) {
    Tensor dx, dw;
    EXPECT_NEAR(run(rows, dx, dw), loss_all, 1e-12) << rows;
    EXPECT_TRUE(assert_close("dx, rows " + std::to_string(rows), dx_all, dx, 1e-13, 1e-13));
    EXPECT_TRUE(assert_close("dweight, rows " + std::to_string(rows), dw_all, dw, 1e-13, 1e-13));
  }
}

TEST(LmHeadCrossEntropy, WeightGradientAccumulatesAndDxIsOverwritten) {
  Rng rng(8);
  const int64_t n = 4, d = 3, v = 6;
  Tensor x = random_tensor({n, d}, rng), w = random_tensor({v, d}, rng), targets = index_tensor({1, 2, 3, 4});
  Tensor dx = Tensor::empty({n, d}, DType::f64), dw = Tensor::zeros({v, d}, DType::f64);
  ops::lm_head_cross_entropy(x, w, targets, 1.0, dx, dw);
  Tensor dx2 = random_tensor({n, d}, rng), dw2 = random_tensor({v, d}, rng), dw_start = dw2.clone();
  ops::lm_head_cross_entropy(x, w, targets, 1.0, dx2, dw2);
  EXPECT_TRUE(assert_close("dx overwritten", dx, dx2, 0, 0));
  for (int64_t i = 0; i < v * d; ++i) {
    EXPECT_NEAR(dw2.data<double>()[i], dw_start.data<double>()[i] + dw.data<double>()[i], 1e-14);
  }
}

TEST(LmHeadCrossEntropy, StableForHugeLogitsAndF32AgreesWithF64) {
  Rng rng(9);
  const int64_t n = 50, d = 16, v = 300;
  std::vector<int32_t> target_values;
  for (int64_t t = 0; t < n; ++t) target_values.push_back(static_cast<int32_t>((t * 37) % v));
  Tensor targets = index_tensor(target_values);
  Tensor x = random_tensor({n, d}, rng), w = random_tensor({v, d}, rng, -30, 30);  // logits up to ~ ±200
  double loss[2];
  Tensor dx[2], dw[2];
  for (int p = 0; p < 2; ++p) {
    const DType dt = p ? DType::f32 : DType::f64;
    dx[p] = Tensor::empty({n, d}, dt);
    dw[p] = Tensor::zeros({v, d}, dt);
    loss[p] = ops::lm_head_cross_entropy(as_dtype(x, dt), as_dtype(w, dt), targets, 1.0 / n, dx[p], dw[p]);
  }
  EXPECT_TRUE(std::isfinite(loss[0]));
  EXPECT_GT(loss[0], 0);
  EXPECT_NEAR(loss[1], loss[0], 1e-5 * loss[0]);
  EXPECT_TRUE(assert_close("dx", dx[0], dx[1], 1e-5));
  EXPECT_TRUE(assert_close("dweight", dw[0], dw[1], 1e-5));
}

TEST(LmHeadCrossEntropy, RejectsBadArgumentsWithoutWriting) {
  Tensor x = Tensor::zeros({2, 3}, DType::f32), w = Tensor::zeros({5, 3}, DType::f32);
  Tensor dx = Tensor::zeros({2, 3}, DType::f32), dw = Tensor::zeros({5, 3}, DType::f32);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::lm_head_cross_entropy(x, w, index_tensor({0, 5}), 1, dx, dw);
      },
      {"lm_head_cross_entropy", "targets", "entry 1", "[0, 5) or -1"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::lm_head_cross_entropy(x, w, index_tensor({-2, 0}), 1, dx, dw);
      },
      {"lm_head_cross_entropy", "targets", "-2"}));
  for (int64_t i = 0; i < dw.numel(); ++i) EXPECT_EQ(dw.data<float>()[i], 0.0f);
  EXPECT_TRUE(throws_invalid_argument([&] { ops::lm_head_cross_entropy(x, w, index_tensor({0}), 1, dx, dw); },
                                      {"lm_head_cross_entropy", "targets", "[2]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::lm_head_cross_entropy(x, Tensor::zeros({5, 4}, DType::f32), index_tensor({0, 1}), 1, dx, dw);
      },
      {"lm_head_cross_entropy", "weight", "[*, 3]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::lm_head_cross_entropy(x, w, index_tensor({0, 1}), 1, dx, Tensor::zeros({5, 3}, DType::f64));
      },
      {"lm_head_cross_entropy", "dweight", "f32"}));
}

}  // namespace
}  // namespace linea
