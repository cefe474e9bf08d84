// The vocabulary-parallel forms of the embedding and of the fused LM head + cross-entropy (ops.h):
// a vocabulary cut into uneven shards gives, summed or combined over the shards, exactly what the
// whole-vocabulary ops give (loss, lse, dx, every row of dweight) in f64, in f32, for huge logits
// and whatever the row blocking; ignored targets and ids outside a shard contribute nothing;
// argument errors name the op and the argument.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/lm_head_cross_entropy.h"
#include "kernels/ops.h"
#include "tests/testing/assert_close.h"
#include "tests/testing/kernel_test.h"

namespace linea {
namespace {

using testing::as_dtype;
using testing::assert_close;
using testing::index_tensor;
using testing::random_tensor;
using testing::throws_invalid_argument;

struct Shard {
  int64_t begin, size;
};
// 13 rows cut unevenly, as the first rows of a split of 13 over 3 ranks would not be: [0, 5), [5, 9), [9, 13).
const std::vector<Shard> kShards{{0, 5}, {5, 4}, {9, 4}};

// Rows [begin, begin + size) of t ([V, D]), as their own tensor (a copy: the ops write their outputs).
Tensor rows(const Tensor& t, Shard s) { return t.slice(s.begin, s.begin + s.size).clone(); }

TEST(EmbeddingShard, ShardsSumToTheWholeLookupAndSplitItsGradient) {
  Rng rng(1);
  const int64_t v = 13, d = 70, n = 12;  // d spans two column slices of the backward
  Tensor table = random_tensor({v, d}, rng), dout = random_tensor({n, d}, rng);
  Tensor ids = index_tensor({0, 4, 5, 12, 9, 4, 8, 5, 0, 11, 3, 4});
  Tensor whole = Tensor::empty({n, d}, DType::f64);
  ops::embedding_forward(whole, table, ids);
  Tensor whole_grad = random_tensor({v, d}, rng), start = whole_grad.clone();
  ops::embedding_backward(whole_grad, dout, ids);

  Tensor sum = Tensor::zeros({n, d}, DType::f64);
  for (const Shard& s : kShards) {
    Tensor out = random_tensor({n, d}, rng);  // overwritten, zeros included
    ops::embedding_shard_forward(out, rows(table, s), ids, s.begin, v);
    ops::add_inplace(sum, out);
    Tensor grad = rows(start, s);  // accumulated onto what is there
    ops::embedding_shard_backward(grad, dout, ids, s.begin, v);
    EXPECT_TRUE(assert_close("dtable rows " + std::to_string(s.begin), rows(whole_grad, s), grad, 0, 0));
  }
  EXPECT_TRUE(assert_close("sum of shard lookups", whole, sum, 0, 0));
}

TEST(EmbeddingShard, RejectsBadArguments) {
  Tensor table = Tensor::zeros({4, 2}, DType::f32), out = Tensor::zeros({2, 2}, DType::f32);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::embedding_shard_forward(out, table, index_tensor({3, -1}), 4, 8);
      },
      {"embedding_shard_forward", "ids", "entry 1", "-1"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::embedding_shard_forward(out, table, index_tensor({3, 8}), 4, 8);
      },
      {"embedding_shard_forward", "ids", "entry 1 is 8", "[0, 8)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::embedding_shard_forward(out, table, index_tensor({3, 1}), -4, 8);
      },
      {"embedding_shard_forward", "vocab_begin", "-4"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::embedding_shard_forward(out, table, index_tensor({3, 1}), 6, 8);
      },
      {"embedding_shard_forward", "vocab", "[6, 10)"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::embedding_shard_backward(table, Tensor::zeros({3, 2}, DType::f32), index_tensor({3, 1}), 4, 8);
      },
      {"embedding_shard_backward", "dout", "[2, 2]"}));
}

// What the shards of a head give together: the loss and lse (step 2) and dx summed, dweight rows.
struct ShardedResult {
  double loss = 0;
  Tensor lse, dx, dweight;
};

ShardedResult run_sharded(const Tensor& x, const Tensor& w, const Tensor& targets, double loss_scale) {
  const int64_t n = x.dim(0), d = x.dim(1), ranks = static_cast<int64_t>(kShards.size());
  const DType dt = x.dtype();
  Tensor gathered = Tensor::empty({ranks, 2, n}, dt);
  for (int64_t r = 0; r < ranks; ++r) {
    ops::lm_head_shard_statistics(gathered.slice(r, r + 1).reshape({2, n}), x, rows(w, kShards[r]), targets,
                                  kShards[r].begin);
  }
  ShardedResult result;
  result.lse = Tensor::empty({n}, dt);
  result.loss = ops::lm_head_combine_statistics(result.lse, gathered, targets);
  result.dx = Tensor::zeros({n, d}, dt);
  result.dweight = Tensor::empty(w.shape(), dt);
  for (const Shard& s : kShards) {
    Tensor dx = Tensor::empty({n, d}, dt), dw = Tensor::zeros({s.size, d}, dt);
    ops::lm_head_shard_backward(dx, dw, x, rows(w, s), targets, s.begin, result.lse, loss_scale);
    ops::add_inplace(result.dx, dx);
    result.dweight.slice(s.begin, s.begin + s.size).copy_from(dw);
  }
  return result;
}

TEST(LmHeadShard, ShardsCombineToTheWholeVocabulary) {
  Rng rng(2);
  const int64_t n = 9, d = 5, v = 13;
  // Targets in every shard, at shard edges, and ignored rows.
  Tensor targets = index_tensor({0, 4, 5, -1, 8, 9, 12, 7, -1});
  Tensor x = random_tensor({n, d}, rng, -2, 2), w = random_tensor({v, d}, rng, -2, 2);
  const double scale = 1.0 / 7;
  Tensor dx = Tensor::empty({n, d}, DType::f64), dw = Tensor::zeros({v, d}, DType::f64);
  const double loss = ops::lm_head_cross_entropy(x, w, targets, scale, dx, dw);
  const ShardedResult s = run_sharded(x, w, targets, scale);
  EXPECT_NEAR(s.loss, loss, 1e-13 * loss);
  EXPECT_TRUE(assert_close("dx", dx, s.dx, 1e-14, 1e-14));
  EXPECT_TRUE(assert_close("dweight", dw, s.dweight, 1e-14, 1e-14));
  // lse is the log-sum-exp over the whole vocabulary, 0 on ignored rows.
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < v; ++j) {
      double logit = 0;
      for (int64_t k = 0; k < d; ++k) logit += x.data<double>()[i * d + k] * w.data<double>()[j * d + k];
      sum += std::exp(logit);
    }
    const double expected = targets.data<int32_t>()[i] < 0 ? 0.0 : std::log(sum);
    EXPECT_NEAR(s.lse.data<double>()[i], expected, 1e-13) << "row " << i;
  }
}

TEST(LmHeadShard, StableForHugeLogitsAndF32AgreesWithTheWholeOp) {
  Rng rng(3);
  const int64_t n = 40, d = 16, v = 13;
  std::vector<int32_t> target_values;
  for (int64_t t = 0; t < n; ++t) target_values.push_back(t % 7 == 3 ? -1 : static_cast<int32_t>((t * 5) % v));
  Tensor targets = index_tensor(target_values);
  Tensor x = random_tensor({n, d}, rng), w = random_tensor({v, d}, rng, -30, 30);  // logits up to ~ ±200
  Tensor x32 = as_dtype(x, DType::f32), w32 = as_dtype(w, DType::f32);
  Tensor dx = Tensor::empty({n, d}, DType::f32), dw = Tensor::zeros({v, d}, DType::f32);
  const double loss = ops::lm_head_cross_entropy(x32, w32, targets, 1.0 / n, dx, dw);
  const ShardedResult s = run_sharded(x32, w32, targets, 1.0 / n);
  EXPECT_TRUE(std::isfinite(s.loss));
  EXPECT_NEAR(s.loss, loss, 1e-6 * loss);
  EXPECT_TRUE(assert_close("dx", dx, s.dx, 1e-5));
  EXPECT_TRUE(assert_close("dweight", dw, s.dweight, 1e-5));
}

TEST(LmHeadShard, ResultDoesNotDependOnRowBlocking) {
  Rng rng(4);
  const int64_t n = 10, d = 6, v = 5, begin = 4;
  std::vector<int32_t> targets{0, 4, 5, 8, -1, 6, 2, 9, 7, 4};
  Tensor x = random_tensor({n, d}, rng), w = random_tensor({v, d}, rng);
  auto run = [&](int64_t rows_per_block, Tensor& stats, Tensor& dx, Tensor& dw) {
    stats = Tensor::empty({2, n}, DType::f64);
    cpu::lm_head_shard_statistics<double>(x.data<double>(), w.data<double>(), targets.data(), n, d, v, begin,
                                          stats.data<double>(), stats.data<double>() + n, rows_per_block);
    dx = Tensor::empty({n, d}, DType::f64);
    dw = Tensor::zeros({v, d}, DType::f64);
    cpu::lm_head_shard_backward<double>(x.data<double>(), w.data<double>(), targets.data(), n, d, v, begin,
                                        stats.data<double>(), 0.5, dx.data<double>(), dw.data<double>(),
                                        rows_per_block);
  };
  Tensor stats_all, dx_all, dw_all;
  run(n, stats_all, dx_all, dw_all);
  for (int64_t rows_per_block : {1, 3, 4}) {
    Tensor stats, dx, dw;
    run(rows_per_block, stats, dx, dw);
    const std::string what = ", rows " + std::to_string(rows_per_block);
    EXPECT_TRUE(assert_close("stats" + what, stats_all, stats, 0, 0));
    EXPECT_TRUE(assert_close("dx" + what, dx_all, dx, 1e-13, 1e-13));
    EXPECT_TRUE(assert_close("dweight" + what, dw_all, dw, 1e-13, 1e-13));
  }
}

TEST(LmHeadShard, RejectsBadArguments) {
  Tensor x = Tensor::zeros({2, 3}, DType::f32), w = Tensor::zeros({4, 3}, DType::f32);
  Tensor stats = Tensor::zeros({2, 2}, DType::f32), lse = Tensor::zeros({2}, DType::f32);
  Tensor targets = index_tensor({0, 9});
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::lm_head_shard_statistics(stats, x, w, index_tensor({0, -2}), 0);
      },
      {"lm_head_shard_statistics", "targets", "-2"}));
  EXPECT_TRUE(throws_invalid_argument([&] { ops::lm_head_shard_statistics(stats, x, w, targets, -1); },
                                      {"lm_head_shard_statistics", "vocab_begin"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::lm_head_shard_statistics(Tensor::zeros({2, 3}, DType::f32), x, w, targets, 0);
      },
      {"lm_head_shard_statistics", "stats", "[2, 2]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::lm_head_combine_statistics(lse, Tensor::zeros({3, 3, 2}, DType::f32), targets);
      },
      {"lm_head_combine_statistics", "gathered_stats"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::lm_head_combine_statistics(Tensor::zeros({3}, DType::f32), Tensor::zeros({2, 2, 2}, DType::f32), targets);
      },
      {"lm_head_combine_statistics", "lse", "[2]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { ops::lm_head_shard_backward(x, w, x, w, targets, 0, Tensor::zeros({2}, DType::f64), 1.0); },
      {"lm_head_shard_backward", "lse", "f32"}));
  EXPECT_TRUE(throws_invalid_argument([&] { ops::lm_head_shard_backward(x, w, x, w, targets, 0, lse, NAN); },
                                      {"lm_head_shard_backward", "loss_scale"}));
}

}  // namespace
}  // namespace linea
