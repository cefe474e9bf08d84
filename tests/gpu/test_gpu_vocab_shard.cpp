// The CUDA vocabulary-parallel ops against the CPU reference (f64 on the same inputs), in f32 and
// bf16, for shards of several offsets and sizes (the whole vocabulary, uneven thirds, a short last
// shard):
//   - the embedding shard lookup (exact: a copy or zeros) and its scatter-add backward onto a
//     nonzero gradient, ids repeated, inside and outside the shard;
//   - the LM head shard statistics and the shard backward under several tilings of the logits (one
//     tile, several row blocks, several vocabulary chunks with ragged ends), targets in every shard,
//     at shard edges and ignored, dweight accumulated onto a nonzero start;
//   - the combination of the shards' statistics (lse and loss);
//   - all shards run one after the other on the GPU through ops:: give the whole head's loss, dx
//     and dweight (what tensor parallelism relies on);
//   - bad statistics dtypes and ids are reported.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
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

class GpuVocabShard : public testing::GpuDtypeTest {};

struct Shard {
  int64_t begin, size;
  int64_t end() const { return begin + size; }
};

// Rows [begin, begin + size) of a host tensor, as their own tensor.
Tensor rows(const Tensor& t, Shard s) { return t.slice(s.begin, s.begin + s.size).clone(); }

// Shards of a vocabulary of v entries: the whole of it, uneven thirds, and a short last shard.
std::vector<Shard> shards_of(int64_t v) {
  const int64_t third = v / 3;
  return {{0, v}, {0, third + 1}, {third + 1, third}, {2 * third + 1, v - 2 * third - 1}, {v - 3, 3}};
}

// Ids (or targets) in [0, v); with `ignored`, every 7th is −1.
Tensor ids_for(int64_t n, int64_t v, Rng& rng, bool ignored) {
  Tensor t = Tensor::empty({n}, DType::i32);
  for (int64_t i = 0; i < n; ++i) {
    t.data<int32_t>()[i] = ignored && i % 7 == 3 ? -1 : static_cast<int32_t>(rng.next_u64() % v);
  }
  return t;
}

std::string name_of(Shard s) { return "shard [" + std::to_string(s.begin) + ", " + std::to_string(s.end()) + ")"; }

TEST_P(GpuVocabShard, EmbeddingShard) {
  const DType dt = GetParam();
  Rng rng(1);
  struct Case {
    int64_t n, v, d;
  };
  for (const Case c : {Case{40, 9, 7}, Case{1000, 50, 64}, Case{4096, 1000, 256}}) {
    const Tensor table = random_values({c.v, c.d}, dt, rng), ids = ids_for(c.n, c.v, rng, false);
    const Tensor dout = random_values({c.n, c.d}, dt, rng), dtable0 = random_values({c.v, c.d}, dt, rng);
    const Tensor gids = to_device(ids, DType::i32), gdout = to_device(dout, dt);
    for (const Shard s : shards_of(c.v)) {
      SCOPED_TRACE(name_of(s) + " of " + std::to_string(c.v) + ", d " + std::to_string(c.d));
      Tensor out = Tensor::empty({c.n, c.d}, DType::f64), dtable = rows(dtable0, s);
      ops::embedding_shard_forward(out, rows(table, s), ids, s.begin, c.v);
      ops::embedding_shard_backward(dtable, dout, ids, s.begin, c.v);

      Tensor gout = Tensor::empty({c.n, c.d}, dt, Device::cuda), gdtable = to_device(rows(dtable0, s), dt);
      ops::embedding_shard_forward(gout, to_device(rows(table, s), dt), gids, s.begin, c.v);
      ops::embedding_shard_backward(gdtable, gdout, gids, s.begin, c.v);
      EXPECT_TRUE(assert_close("out", out, to_host(gout), 0.0, 0.0)) << "a lookup is a copy or zeros";
      EXPECT_TRUE(assert_close("dtable", dtable, to_host(gdtable), tolerance(dt)));
    }
  }
}

TEST_P(GpuVocabShard, LmHeadShardStatisticsAndBackward) {
  const DType dt = GetParam();
  Rng rng(2);
  struct Case {
    int64_t n, d, v;
    cuda::LmHeadTiling tiling;  // {0, 0}: the op's default for the shard
  };
  for (const Case c : {Case{1, 8, 5, {0, 0}}, Case{50, 32, 300, {0, 0}}, Case{300, 64, 1000, {128, 100}},
                       Case{129, 48, 777, {64, 1000}}, Case{257, 40, 513, {300, 37}}}) {
    const Tensor x = random_values({c.n, c.d}, dt, rng, -2, 2), w = random_values({c.v, c.d}, dt, rng, -1, 1);
    const Tensor targets = ids_for(c.n, c.v, rng, true), dw0 = random_values({c.v, c.d}, dt, rng, -1e-3, 1e-3);
    const Tensor gx = to_device(x, dt), gt = to_device(targets, DType::i32);
    const double scale = 1.0 / c.n;
    // The whole vocabulary's lse (from the CPU's statistics of the shards of shards_of(v)[1..3]).
    const std::vector<Shard> all = shards_of(c.v);
    const std::vector<Shard> cover(all.begin() + 1, all.begin() + 4);
    Tensor gathered = Tensor::empty({3, 2, c.n}, DType::f64);
    for (int64_t r = 0; r < 3; ++r) {
      ops::lm_head_shard_statistics(gathered.slice(r, r + 1).reshape({2, c.n}), x, rows(w, cover[r]), targets,
                                    cover[r].begin);
    }
    Tensor lse = Tensor::empty({c.n}, DType::f64);
    const double loss = ops::lm_head_combine_statistics(lse, gathered, targets);

    // Combining on the GPU (f32 statistics).
    Tensor glse = Tensor::empty({c.n}, DType::f32, Device::cuda);
    const double gloss = ops::lm_head_combine_statistics(glse, to_device(gathered, DType::f32), gt);
    EXPECT_NEAR(gloss, loss, 1e-5 * std::abs(loss));
    EXPECT_TRUE(assert_close("combined lse", lse, to_host(glse), tolerance(DType::f32)));

    for (const Shard s : all) {
      const cuda::LmHeadTiling tiling = c.tiling.rows ? c.tiling : cuda::lm_head_default_tiling(c.n, s.size);
      SCOPED_TRACE(name_of(s) + " of " + std::to_string(c.v) + ", tiling " + std::to_string(tiling.rows) + " × " +
                   std::to_string(tiling.vocab));
      const Tensor ws = rows(w, s), gws = to_device(ws, dt);
      Tensor stats = Tensor::empty({2, c.n}, DType::f64);
      ops::lm_head_shard_statistics(stats, x, ws, targets, s.begin);
      Tensor gstats = Tensor::empty({2, c.n}, DType::f32, Device::cuda);
      cuda::lm_head_shard_statistics(gstats, gx, gws, gt, s.begin, tiling);
      EXPECT_TRUE(assert_close("statistics", stats, to_host(gstats), tolerance(DType::f32)));

      Tensor dx = Tensor::empty({c.n, c.d}, DType::f64), dw = rows(dw0, s);
      ops::lm_head_shard_backward(dx, dw, x, ws, targets, s.begin, lse, scale);
      Tensor gdx = Tensor::empty({c.n, c.d}, dt, Device::cuda), gdw = to_device(rows(dw0, s), dt);
      cuda::lm_head_shard_backward(gdx, gdw, gx, gws, gt, s.begin, to_device(lse, DType::f32), scale, tiling);
      EXPECT_TRUE(assert_close("dx", dx, to_host(gdx), tolerance(dt)));
      EXPECT_TRUE(assert_close("dweight", dw, to_host(gdw), tolerance(dt)));
    }
  }
}

TEST_P(GpuVocabShard, ShardsTogetherGiveTheWholeHead) {
  const DType dt = GetParam();
  Rng rng(3);
  const int64_t n = 200, d = 64, v = 1001;
  const Tensor x = random_values({n, d}, dt, rng, -2, 2), w = random_values({v, d}, dt, rng, -1, 1);
  const Tensor targets = ids_for(n, v, rng, true);
  const double scale = 1.0 / n;
  Tensor dx = Tensor::empty({n, d}, DType::f64), dw = Tensor::zeros({v, d}, DType::f64);
  const double loss = ops::lm_head_cross_entropy(x, w, targets, scale, dx, dw);

  const std::vector<Shard> all = shards_of(v);
  const std::vector<Shard> cover(all.begin() + 1, all.begin() + 4);
  const auto ranks = static_cast<int64_t>(cover.size());
  const Tensor gx = to_device(x, dt), gt = to_device(targets, DType::i32);
  Tensor gathered = Tensor::empty({ranks, 2, n}, DType::f32, Device::cuda);
  std::vector<Tensor> gw;
  for (int64_t r = 0; r < ranks; ++r) {
    gw.push_back(to_device(rows(w, cover[r]), dt));
    ops::lm_head_shard_statistics(gathered.slice(r, r + 1).reshape({2, n}), gx, gw.back(), gt, cover[r].begin);
  }
  Tensor glse = Tensor::empty({n}, DType::f32, Device::cuda);
  const double gloss = ops::lm_head_combine_statistics(glse, gathered, gt);
  EXPECT_NEAR(gloss, loss, 1e-5 * std::abs(loss));
  Tensor dx_sum = Tensor::zeros({n, d}, DType::f64), dw_all = Tensor::empty({v, d}, DType::f64);
  for (int64_t r = 0; r < ranks; ++r) {
    Tensor gdx = Tensor::empty({n, d}, dt, Device::cuda), gdw = Tensor::zeros(gw[r].shape(), dt, Device::cuda);
    ops::lm_head_shard_backward(gdx, gdw, gx, gw[r], gt, cover[r].begin, glse, scale);
    ops::add_inplace(dx_sum, to_host(gdx));
    dw_all.slice(cover[r].begin, cover[r].end()).copy_from(to_host(gdw));
  }
  EXPECT_TRUE(assert_close("dx summed over the shards", dx, dx_sum, tolerance(dt)));
  EXPECT_TRUE(assert_close("dweight of the shards", dw, dw_all, tolerance(dt)));
}

TEST_P(GpuVocabShard, BadArgumentsAreReported) {
  const DType dt = GetParam();
  Rng rng(4);
  const Tensor x = to_device(random_values({3, 4}, dt, rng), dt), w = to_device(random_values({6, 4}, dt, rng), dt);
  Tensor targets = Tensor::empty({3}, DType::i32);
  targets.data<int32_t>()[0] = 1;
  targets.data<int32_t>()[1] = -1;
  targets.data<int32_t>()[2] = 40;  // another shard's: fine
  const Tensor gt = to_device(targets, DType::i32);
  const auto expect_error = [](auto&& call, const std::vector<std::string>& parts) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one naming " << parts.front();
    } catch (const std::invalid_argument& e) {
      for (const std::string& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error(
      [&] {
        ops::lm_head_shard_statistics(Tensor::empty({2, 3}, DType::bf16, Device::cuda), x, w, gt, 0);
      },
      {"lm_head_shard_statistics", "stats", "f32"});
  expect_error(
      [&] {
        ops::lm_head_combine_statistics(Tensor::empty({3}, DType::bf16, Device::cuda),
                                        Tensor::empty({2, 2, 3}, DType::bf16, Device::cuda), gt);
      },
      {"lm_head_combine_statistics", "gathered_stats", "f32"});
  expect_error(
      [&] {
        ops::lm_head_shard_backward(Tensor(), Tensor(), x, w, gt, 0, Tensor::empty({3}, DType::bf16, Device::cuda),
                                    1.0);
      },
      {"lm_head_shard_backward", "lse", "f32"});
  Tensor ids = Tensor::empty({2}, DType::i32);
  ids.data<int32_t>()[0] = 7;
  ids.data<int32_t>()[1] = -2;
  Tensor out = Tensor::empty({2, 4}, dt, Device::cuda);
  expect_error([&] { ops::embedding_shard_forward(out, w, to_device(ids, DType::i32), 5, 20); },
               {"embedding_shard_forward", "ids: entry 1 is -2"});
  ids.data<int32_t>()[1] = 20;  // past the vocabulary, not only the shard
  expect_error([&] { ops::embedding_shard_forward(out, w, to_device(ids, DType::i32), 5, 20); },
               {"embedding_shard_forward", "ids: entry 1 is 20", "[0, 20)"});
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuVocabShard, ::testing::Values(DType::f32, DType::bf16), testing::dtype_test_name);

}  // namespace
}  // namespace linea
