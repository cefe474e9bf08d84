// Moving between a parameter's shard (what one tensor-parallel rank holds, parameters.h) and its
// full logical tensor: taking a shard out of a full tensor (initialisation, loading), putting
// shards back together (checkpoints, Muon's whole matrices, tests). CPU tensors.
//
// A shard of dimension `dim` holding indices `range` of a tensor of shape full_shape is the
// contiguous tensor full[..., range, ...]: viewing full as [outer, full_shape[dim], inner] (outer
// and inner the products of the dimensions before and after dim), the shard is [outer, range.size,
// inner].
#pragma once
#include "kernels/random.h"
#include "parallel/communicator.h"
#include "worker/parameters.h"

namespace linea {

// shard ← full[..., range, ...] along dim (same dtype; shard has full's shape with range.size at dim).
void copy_from_full(const Tensor& full, int dim, ShardRange range, Tensor shard);
// full[..., range, ...] ← shard.
void copy_into_full(const Tensor& shard, int dim, ShardRange range, Tensor full);

// p.value ← this rank's shard of `full` (p.full_shape, p's dtype); the whole of it when replicated.
void assign_from_full(Parameter& p, const Tensor& full);
// p.value ← this rank's shard of a full tensor drawn from N(0, std) in row-major order, so that
// every TP size gives the same logical tensor from the same rng state (and leaves rng in the
// same state).
void init_normal(Parameter& p, Rng& rng, double std);

// Collective over the TP group (every rank calls it for the same parameter): the full logical
// tensor of which `shard` (p.value, p.grad, or a tensor laid out like them) is this rank's part,
// assembled from the shards of all ranks. A replicated parameter gives a copy of `shard`.
Tensor gather_full(const Parameter& p, const Tensor& shard, Communicator& tp);

}  // namespace linea
