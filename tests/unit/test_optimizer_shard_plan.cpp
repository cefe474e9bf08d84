// OptimizerShardPlan: every element in exactly one piece, whole parameters whole on their greedy
// owner, pieces cut at row boundaries, chunks laid out whole-first and as equal as rows allow.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "worker/optimizer_shard_plan.h"

namespace linea {
namespace {

bool is_matrix(const Parameter& p) { return p.role == ParamRole::matrix; }

// A model-like set: embedding, per-layer matrices of several sizes, norms, a gate scalar.
void declare(ParameterSet& params) {
  params.declare("embedding", {50, 16}, ParamRole::embedding, false);
  for (int layer = 0; layer < 3; ++layer) {
    const std::string prefix = "layers." + std::to_string(layer) + ".";
    params.declare(prefix + "norm", {16}, ParamRole::vector, false);
    params.declare(prefix + "q", {32, 16}, ParamRole::matrix, true);
    params.declare(prefix + "up", {64, 16}, ParamRole::matrix, true);
    params.declare(prefix + "down", {16, 64}, ParamRole::matrix, true);
    params.declare(prefix + "conv", {8, 4}, ParamRole::conv, true);
    params.declare(prefix + "lambda", {}, ParamRole::gate, false);
  }
  params.declare("head", {50, 16}, ParamRole::head, true);
  params.finalize();
}

void check_plan(const ParameterSet& params, int ranks, const std::function<bool(const Parameter&)>& whole) {
  SCOPED_TRACE("ranks " + std::to_string(ranks));
  const OptimizerShardPlan plan(params, ranks, whole);
  ASSERT_EQ(plan.ranks(), ranks);
  std::vector<int> covered(static_cast<size_t>(params.numel()), 0);
  const auto& ps = params.params();
  int64_t largest_row = 1;
  for (const Parameter& p : ps) {
    if (!whole(p)) largest_row = std::max(largest_row, row_numel(p));
  }
  int64_t largest = 0;
  for (int r = 0; r < ranks; ++r) {
    int64_t chunk_at = 0;
    bool in_whole_part = true;
    for (const ShardPiece& piece : plan.pieces(r)) {
      const Parameter& p = ps[piece.param];
      EXPECT_EQ(piece.whole, whole(p)) << p.name;
      if (piece.whole) {
        EXPECT_TRUE(in_whole_part) << "whole pieces come first in the chunk";
        EXPECT_EQ(plan.owner(piece.param), r) << p.name;
        EXPECT_EQ(piece.row_begin, 0);
        EXPECT_EQ(piece.row_end, row_count(p));
      } else {
        in_whole_part = false;
        EXPECT_EQ(plan.owner(piece.param), -1) << p.name;
      }
      EXPECT_LT(piece.row_begin, piece.row_end) << p.name;
      EXPECT_EQ(piece.numel, (piece.row_end - piece.row_begin) * row_numel(p)) << p.name;
      EXPECT_EQ(piece.offset, p.offset + piece.row_begin * row_numel(p)) << p.name;
      EXPECT_EQ(piece.chunk_offset, chunk_at) << "pieces follow each other in the chunk";
      chunk_at += piece.numel;
      for (int64_t i = piece.offset; i < piece.offset + piece.numel; ++i) ++covered[static_cast<size_t>(i)];
    }
    EXPECT_EQ(chunk_at, plan.numel(r));
    EXPECT_LE(plan.numel(r), plan.chunk_numel());
    EXPECT_LE(plan.whole_numel(r), plan.whole_chunk_numel());
    largest = std::max(largest, plan.numel(r));
  }
  for (size_t i = 0; i < covered.size(); ++i) ASSERT_EQ(covered[i], 1) << "element " << i;
  EXPECT_EQ(largest, plan.chunk_numel());
  // Water filling: the ranks that took part of the run are level to within a row or so, and a rank
  // that took none is already at least that full with its whole parameters.
  int64_t low = params.numel(), high = 0;
  for (int r = 0; r < ranks; ++r) {
    if (plan.numel(r) == plan.whole_numel(r)) continue;
    low = std::min(low, plan.numel(r));
    high = std::max(high, plan.numel(r));
  }
  EXPECT_LE(high - low, 2 * largest_row) << "filled chunks " << low << " … " << high;
  for (int r = 0; r < ranks; ++r) {
    if (plan.numel(r) == plan.whole_numel(r)) {
      EXPECT_GE(plan.numel(r), low - largest_row) << "rank " << r;
    }
  }
}

TEST(OptimizerShardPlan, EveryElementOnceAndChunksLevelled) {
  ParameterSet params;
  declare(params);
  for (int ranks = 1; ranks <= 6; ++ranks) {
    check_plan(params, ranks, is_matrix);
    check_plan(params, ranks, [](const Parameter&) { return false; });  // AdamW: no whole parameters
  }
}

TEST(OptimizerShardPlan, OwnersAreGreedyByNewtonSchulzWork) {
  ParameterSet params;
  params.declare("small", {4, 4}, ParamRole::matrix, true);   // cost 4·4·4 = 64
  params.declare("big", {16, 8}, ParamRole::matrix, true);    // cost 16·8·8 = 1024
  params.declare("wide", {2, 64}, ParamRole::matrix, true);   // cost 2·64·2 = 256
  params.declare("medium", {8, 8}, ParamRole::matrix, true);  // cost 512
  params.declare("bias", {10}, ParamRole::vector, false);
  params.finalize();
  const OptimizerShardPlan plan(params, 2, is_matrix);
  // big → 0 (1024); medium → 1 (512); wide → 1 (768); small → 1 (832 < 1024)
  EXPECT_EQ(plan.owner(1), 0);
  EXPECT_EQ(plan.owner(3), 1);
  EXPECT_EQ(plan.owner(2), 1);
  EXPECT_EQ(plan.owner(0), 1);
  EXPECT_EQ(plan.owner(4), -1);
  EXPECT_EQ(plan.whole_numel(0), 128);
  EXPECT_EQ(plan.whole_numel(1), 16 + 128 + 64);
  // Water filling: the 10 bias elements go to rank 0, the lighter one (128 + 10 = 138 < 208).
  ASSERT_EQ(plan.pieces(0).size(), 2u);
  EXPECT_EQ(plan.pieces(0)[1].param, 4u);
  EXPECT_EQ(plan.pieces(0)[1].numel, 10);
  EXPECT_EQ(plan.chunk_numel(), 208);
  EXPECT_EQ(plan.whole_chunk_numel(), 208);
  // The same on every call (every rank computes it for itself).
  const OptimizerShardPlan again(params, 2, is_matrix);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(again.pieces(r).size(), plan.pieces(r).size());
    for (size_t i = 0; i < plan.pieces(r).size(); ++i) EXPECT_EQ(again.pieces(r)[i].offset, plan.pieces(r)[i].offset);
  }
}

TEST(OptimizerShardPlan, CutsOnlyAtRowBoundaries) {
  ParameterSet params;
  params.declare("table", {7, 10}, ParamRole::embedding, false);  // rows of 10 elements
  params.finalize();
  const OptimizerShardPlan plan(params, 3, is_matrix);
  // 70 elements over 3 ranks: level 24, so cuts near 24 and 48 → the row boundaries 20 and 50.
  ASSERT_EQ(plan.pieces(0).size(), 1u);
  EXPECT_EQ(plan.pieces(0)[0].row_end, 2);
  EXPECT_EQ(plan.pieces(1)[0].row_begin, 2);
  EXPECT_EQ(plan.pieces(1)[0].row_end, 5);
  EXPECT_EQ(plan.pieces(2)[0].row_begin, 5);
  EXPECT_EQ(plan.pieces(2)[0].row_end, 7);
  EXPECT_EQ(plan.chunk_numel(), 30);

  // More ranks than rows: some ranks get nothing, every row is still somewhere.
  const OptimizerShardPlan many(params, 10, is_matrix);
  int64_t total = 0;
  for (int r = 0; r < 10; ++r) total += many.numel(r);
  EXPECT_EQ(total, 70);
  EXPECT_EQ(many.chunk_numel(), 10);

  EXPECT_THROW(OptimizerShardPlan(params, 0, is_matrix), std::invalid_argument);
}

}  // namespace
}  // namespace linea
