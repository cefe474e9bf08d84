// OptimizerShardPlan: how the optimizer's work and state for a ParameterSet are split over the R
// ranks of a data-parallel group (ZeRO-1 and distributed Muon, worker/distributed_optimizer.h).
//
// - Whole parameters (Muon's matrices: Newton–Schulz needs each one whole) get one owner rank each,
//   greedily: costliest first (ties: declaration order), each to the rank with the least cost so
//   far (ties: the lower rank). The cost of an m × n matrix is its Newton–Schulz work, ∝ m·n·min(m, n);
//   of any other shape, its element count. Costs come from the full (logical) shapes, so under
//   tensor parallelism every TP rank assigns the same owners, even where its shards differ in
//   size: the TP ranks of an owner then gather each of its matrices together.
// - The other parameters, in declaration order, form one run of rows (a row: the elements of one
//   index along dimension 0; a 1-D parameter's rows are its elements). The run is cut at row
//   boundaries into R consecutive parts, rank r's part ending at the boundary nearest to where
//   "water filling" puts it: every rank filled up to the same level L over its whole parameters.
//   So the chunks come out as equal as rows allow, whatever the owners' loads.
// A piece is rows [row_begin, row_end) of one parameter; every element of the set lies in exactly
// one piece of one rank. Rank r's chunk is its pieces back to back, whole ones first (declaration
// order), padded to chunk_numel() — the largest chunk — so that R chunks are the equal parts a
// reduce_scatter or all_gather needs. The whole pieces alone, padded to whole_chunk_numel(), are
// the chunks of an all_gather of the whole parameters only.
// The plan depends only on the parameters' shapes, the selector and R: every rank of a DP group
// computes the same.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "model/parameters.h"

namespace linea {

struct ShardPiece {
  size_t param = 0;  // index in ParameterSet::params()
  int64_t row_begin = 0, row_end = 0;
  int64_t offset = 0;  // its first element in the flat parameter buffer
  int64_t numel = 0;
  int64_t chunk_offset = 0;  // its first element in the owner's chunk
  bool whole = false;        // the whole parameter (one of the selected ones)
};

class OptimizerShardPlan {
 public:
  // `params` must be finalized (or at least fully declared); ranks >= 1.
  OptimizerShardPlan(const ParameterSet& params, int ranks, const std::function<bool(const Parameter&)>& whole);

  int ranks() const { return static_cast<int>(pieces_.size()); }
  const std::vector<ShardPiece>& pieces(int rank) const { return pieces_.at(static_cast<size_t>(rank)); }
  int64_t numel(int rank) const { return numel_.at(static_cast<size_t>(rank)); }  // without padding
  int64_t whole_numel(int rank) const { return whole_numel_.at(static_cast<size_t>(rank)); }
  int64_t chunk_numel() const { return chunk_numel_; }
  int64_t whole_chunk_numel() const { return whole_chunk_numel_; }
  // The owner of a whole parameter; -1 for the others.
  int owner(size_t param) const { return owner_.at(param); }

 private:
  std::vector<std::vector<ShardPiece>> pieces_;
  std::vector<int64_t> numel_, whole_numel_;
  std::vector<int> owner_;
  int64_t chunk_numel_ = 0, whole_chunk_numel_ = 0;
};

// Elements of one row of p: the product of its dimensions after the first (1 for 0-D and 1-D).
int64_t row_numel(const Parameter& p);
// Rows of p: its first dimension (1 for a 0-D parameter).
int64_t row_count(const Parameter& p);

}  // namespace linea
