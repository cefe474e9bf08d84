// Moving between a parameter's shard (what one tensor-parallel rank holds, parameters.h) and its
// full logical tensor: taking a shard out of a full tensor (initialisation, loading), putting
// shards back together (checkpoints, Muon's whole matrices, tests). Tensors on either device;
// init_normal draws on the CPU.
//
// A shard of dimension `dim` holding indices `range` of a tensor of shape full_shape is the
// contiguous tensor full[..., range, ...]: viewing full as [outer, full_shape[dim], inner] (outer
// and inner the products of the dimensions before and after dim), the shard is [outer, range.size,
// inner].
#pragma once
#include <vector>

#include "kernels/random.h"
#include "model/parameters.h"
#include "parallel/communicator.h"

namespace linea {

// shard ← full[..., range, ...] along dim (same dtype; shard has full's shape with range.size at dim;
// each may be on either device: one strided copy).
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
// assembled from the shards of all ranks, on tp's device (shard must be there: host tensors for an
// MPI group, this rank's GPU for an NCCL one). A replicated parameter gives a copy of `shard`.
Tensor gather_full(const Parameter& p, const Tensor& shard, Communicator& tp);

// The same in steps, for callers that gather a parameter again and again (Muon's TP-split
// matrices) without allocating each time:
// shard_ranges: every TP rank's indices of p.shard_dim, in rank order (collective; the ranges move
// through the host; std::runtime_error unless they tile the dimension);
std::vector<ShardRange> shard_ranges(const Parameter& p, Communicator& tp);
// gather_staging_numel: the elements of the staging buffer gather_full_into needs (every rank's
// shard padded to the largest);
int64_t gather_staging_numel(const Parameter& p, const std::vector<ShardRange>& ranges);
// gather_full_into: full (p.full_shape, on tp's device) ← the shards, through `staging` (at least
// that many elements of shard's dtype, on tp's device): one all-gather, then one strided copy per
// rank into place, whichever dimension is split.
void gather_full_into(const Parameter& p, const Tensor& shard, Communicator& tp, const std::vector<ShardRange>& ranges,
                      const Tensor& staging, const Tensor& full);

}  // namespace linea
