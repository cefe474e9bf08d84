// TensorParallel: the tensor-parallel (TP) group a Model is split over, Megatron-style, and what
// its modules need of it: which part of a dimension this rank holds, and the sum over the group.
//
// In a model built with size R > 1 every rank sees the same tokens and holds:
//   - of each mixer, heads [r·H/R, (r+1)·H/R): the column-parallel projections into them (q, k, v,
//     β, decay, gates; Linear split on its outputs), their per-head parameters (A_log, dt_bias,
//     conv filters), and the row-parallel o_proj out of them (split on its inputs);
//   - of the MLP, a part of the hidden width (gate/up split on outputs, down on inputs);
//   - of the embedding and the untied LM head, a part of the vocabulary;
//   - everything else whole (norms of d_model, the first factors of low-rank projections, a
//     mixer's output-norm weight shared by its heads).
// The residual stream is whole and identical on every rank. A block's mixer and MLP outputs are
// summed over the group in forward (Megatron's g) and the gradients of their inputs in backward
// (f's transpose): all_reduce_sum below. Heads (and kv heads) must split evenly; MLP width and
// vocabulary may split unevenly (the first extent mod R ranks hold one more).
// size 1 (the default; comm may be null) is a model without tensor parallelism.
#pragma once
#include <cstdint>
#include <string_view>

#include "model/parameters.h"
#include "parallel/communicator.h"

namespace linea {

// The heads of a head-sharded layer that this rank holds (whole heads), and where they sit in the
// layer's head-major widths: the rows of each column-parallel projection into them, the columns
// of the row-parallel projection out of them, their per-head parameters and conv channels.
struct HeadShard {
  ShardRange heads;
  int64_t size() const { return heads.size; }
  // The indices of a head-major width of per_head values per head that these heads occupy.
  ShardRange channels(int64_t per_head) const { return {heads.begin * per_head, heads.size * per_head}; }
};

struct TensorParallel {
  Communicator* comm = nullptr;
  int rank = 0;
  int size = 1;

  // The whole of `group` (a ProcessGrid's GridAxis::tp communicator).
  static TensorParallel over(Communicator& group) { return {&group, group.rank(), group.size()}; }

  // Throws std::invalid_argument unless 0 ≤ rank < size and, when size > 1, comm is a group of
  // `size` ranks in which this process is `rank`.
  void validate() const;

  // This rank's part of `extent` items (rows, heads, ...) split over the group in rank order:
  // ⌊extent/size⌋ items, one more on the first extent mod size ranks. `key` names the config field
  // in the error thrown when extent < size.
  ShardRange split(int64_t extent, std::string_view key) const;
  // The same when extent is a multiple of size (heads); otherwise std::invalid_argument naming key.
  ShardRange split_evenly(int64_t extent, std::string_view key) const;
  // This rank's heads of a layer of `heads` heads (split_evenly; key names the config field).
  HeadShard shard_heads(int64_t heads, std::string_view key) const { return {split_evenly(heads, key)}; }

  // x ← Σ over the group, in place (nothing at size 1). Collective: every rank of the group calls
  // it at the same point with the same shape.
  void all_reduce_sum(const Tensor& x) const;
};

}  // namespace linea
