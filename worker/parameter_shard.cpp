#include "worker/parameter_shard.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace linea {

namespace {

// Calls copy(outer_index, offset_in_full, offset_in_shard, bytes) for each contiguous run of a
// shard: the shard is `outer` runs of range.size · inner elements.
template <class Copy>
void for_each_run(const Shape& full_shape, int dim, ShardRange range, DType dtype, Copy&& copy) {
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < static_cast<int>(full_shape.size()); ++i) {
    if (i < dim) outer *= full_shape[static_cast<size_t>(i)];
    if (i > dim) inner *= full_shape[static_cast<size_t>(i)];
  }
  const int64_t extent = full_shape[static_cast<size_t>(dim)];
  const size_t elem = dtype_size(dtype);
  const size_t run_bytes = static_cast<size_t>(range.size * inner) * elem;
  for (int64_t o = 0; o < outer; ++o) {
    copy(static_cast<size_t>((o * extent + range.begin) * inner) * elem, static_cast<size_t>(o) * run_bytes, run_bytes);
  }
}

void check_shard_shape(const Tensor& full, int dim, ShardRange range, const Tensor& shard, const char* who) {
  if (full.device() != Device::cpu || shard.device() != Device::cpu || full.dtype() != shard.dtype()) {
    throw std::invalid_argument(std::string(who) + ": expected CPU tensors of one dtype, got " + full.describe() +
                                " and " + shard.describe());
  }
  if (dim < 0 || dim >= full.ndim() || range.begin < 0 || range.end() > full.dim(dim)) {
    throw std::invalid_argument(std::string(who) + ": indices [" + std::to_string(range.begin) + ", " +
                                std::to_string(range.end()) + ") of dimension " + std::to_string(dim) +
                                " are not inside " + full.describe());
  }
  Shape expected = full.shape();
  expected[static_cast<size_t>(dim)] = range.size;
  check_shape(shard, expected, std::string(who) + ": shard");
}

}  // namespace

void copy_from_full(const Tensor& full, int dim, ShardRange range, Tensor shard) {
  check_shard_shape(full, dim, range, shard, "copy_from_full");
  const char* src = static_cast<const char*>(full.raw());
  char* dst = static_cast<char*>(shard.raw());
  for_each_run(full.shape(), dim, range, full.dtype(), [&](size_t full_at, size_t shard_at, size_t bytes) {
    std::memcpy(dst + shard_at, src + full_at, bytes);
  });
}

void copy_into_full(const Tensor& shard, int dim, ShardRange range, Tensor full) {
  check_shard_shape(full, dim, range, shard, "copy_into_full");
  const char* src = static_cast<const char*>(shard.raw());
  char* dst = static_cast<char*>(full.raw());
  for_each_run(full.shape(), dim, range, full.dtype(), [&](size_t full_at, size_t shard_at, size_t bytes) {
    std::memcpy(dst + full_at, src + shard_at, bytes);
  });
}

void assign_from_full(Parameter& p, const Tensor& full) {
  check_shape(full, p.full_shape, "assign_from_full: " + p.name);
  if (p.shard_dim < 0) {
    p.value.copy_from(full);
  } else {
    copy_from_full(full, p.shard_dim, {p.shard_offset, p.shape[static_cast<size_t>(p.shard_dim)]}, p.value);
  }
}

void init_normal(Parameter& p, Rng& rng, double std) {
  if (p.shard_dim < 0) {
    fill_normal(p.value, rng, 0.0, std);
    return;
  }
  Tensor full = Tensor::empty(p.full_shape, p.value.dtype());
  fill_normal(full, rng, 0.0, std);
  assign_from_full(p, full);
}

Tensor gather_full(const Parameter& p, const Tensor& shard, Communicator& tp) {
  check_shape(shard, p.shape, "gather_full: " + p.name);
  if (p.shard_dim < 0) return shard.clone();
  // Every rank's range, then every rank's shard padded to the largest (all_gather moves equal counts).
  const int ranks = tp.size();
  const int64_t extent = p.shape[static_cast<size_t>(p.shard_dim)];
  Tensor range = Tensor::empty({2}, DType::i64), ranges = Tensor::empty({ranks, 2}, DType::i64);
  range.data<int64_t>()[0] = p.shard_offset;
  range.data<int64_t>()[1] = extent;
  tp.all_gather(range, ranges);
  const int64_t per_index = shard.numel() / extent;  // elements per index of shard_dim
  int64_t largest = 0, covered = 0;
  for (int r = 0; r < ranks; ++r) {
    const int64_t begin = ranges.data<int64_t>()[2 * r], size = ranges.data<int64_t>()[2 * r + 1];
    if (begin != covered) {
      throw std::runtime_error("gather_full: " + p.name + ": the shard of rank " + std::to_string(r) +
                               " starts at index " + std::to_string(begin) + " of dimension " +
                               std::to_string(p.shard_dim) + ", expected " + std::to_string(covered));
    }
    covered += size;
    largest = std::max(largest, size);
  }
  if (covered != p.full_shape[static_cast<size_t>(p.shard_dim)]) {
    throw std::runtime_error("gather_full: " + p.name + ": the shards cover " + std::to_string(covered) + " of " +
                             std::to_string(p.full_shape[static_cast<size_t>(p.shard_dim)]) + " indices");
  }
  Tensor padded = Tensor::zeros({largest * per_index}, shard.dtype());
  std::memcpy(padded.raw(), shard.raw(), shard.nbytes());
  Tensor all = Tensor::empty({ranks, largest * per_index}, shard.dtype());
  tp.all_gather(padded, all);
  Tensor full = Tensor::empty(p.full_shape, shard.dtype());
  const size_t row_bytes = static_cast<size_t>(largest * per_index) * dtype_size(shard.dtype());
  for (int r = 0; r < ranks; ++r) {
    const ShardRange part{ranges.data<int64_t>()[2 * r], ranges.data<int64_t>()[2 * r + 1]};
    Shape part_shape = p.full_shape;
    part_shape[static_cast<size_t>(p.shard_dim)] = part.size;
    copy_into_full(Tensor::view(static_cast<char*>(all.raw()) + r * row_bytes, part_shape, shard.dtype()), p.shard_dim,
                   part, full);
  }
  return full;
}

}  // namespace linea
