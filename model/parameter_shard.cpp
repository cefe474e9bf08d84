#include "model/parameter_shard.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/device_memory.h"
#include "parallel/host_collectives.h"

namespace linea {

namespace {

// The shard as `outer` runs of range.size · inner elements, run o at element (o · extent +
// range.begin) · inner of full and o · range.size · inner of the shard, in bytes.
struct Runs {
  size_t full_offset, full_pitch, shard_pitch, width, count;
};

Runs runs_of(const Shape& full_shape, int dim, ShardRange range, DType dtype) {
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < static_cast<int>(full_shape.size()); ++i) {
    if (i < dim) outer *= full_shape[static_cast<size_t>(i)];
    if (i > dim) inner *= full_shape[static_cast<size_t>(i)];
  }
  const size_t elem = dtype_size(dtype);
  const size_t width = static_cast<size_t>(range.size * inner) * elem;
  return {static_cast<size_t>(range.begin * inner) * elem,
          static_cast<size_t>(full_shape[static_cast<size_t>(dim)] * inner) * elem, width, width,
          static_cast<size_t>(outer)};
}

void check_shard_shape(const Tensor& full, int dim, ShardRange range, const Tensor& shard, const char* who) {
  if (full.dtype() != shard.dtype()) {
    throw std::invalid_argument(std::string(who) + ": expected tensors of one dtype, got " + full.describe() + " and " +
                                shard.describe());
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
  const Runs r = runs_of(full.shape(), dim, range, full.dtype());
  copy_device_memory_2d(shard.raw(), r.shard_pitch, shard.device(),
                        static_cast<const char*>(full.raw()) + r.full_offset, r.full_pitch, full.device(), r.width,
                        r.count);
}

void copy_into_full(const Tensor& shard, int dim, ShardRange range, Tensor full) {
  check_shard_shape(full, dim, range, shard, "copy_into_full");
  const Runs r = runs_of(full.shape(), dim, range, full.dtype());
  copy_device_memory_2d(static_cast<char*>(full.raw()) + r.full_offset, r.full_pitch, full.device(), shard.raw(),
                        r.shard_pitch, shard.device(), r.width, r.count);
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

std::vector<ShardRange> shard_ranges(const Parameter& p, Communicator& tp) {
  if (p.shard_dim < 0) throw std::invalid_argument("shard_ranges: " + p.name + " is not split over tensor parallelism");
  const int ranks = tp.size();
  Tensor range = Tensor::empty({2}, DType::i64), all = Tensor::empty({ranks, 2}, DType::i64);
  range.data<int64_t>()[0] = p.shard_offset;
  range.data<int64_t>()[1] = p.shape[static_cast<size_t>(p.shard_dim)];
  all_gather_host(tp, range, all);
  std::vector<ShardRange> ranges;
  int64_t covered = 0;
  for (int r = 0; r < ranks; ++r) {
    const ShardRange part{all.data<int64_t>()[2 * r], all.data<int64_t>()[2 * r + 1]};
    if (part.begin != covered) {
      throw std::runtime_error("shard_ranges: " + p.name + ": the shard of rank " + std::to_string(r) +
                               " starts at index " + std::to_string(part.begin) + " of dimension " +
                               std::to_string(p.shard_dim) + ", expected " + std::to_string(covered));
    }
    covered = part.end();
    ranges.push_back(part);
  }
  if (covered != p.full_shape[static_cast<size_t>(p.shard_dim)]) {
    throw std::runtime_error("shard_ranges: " + p.name + ": the shards cover " + std::to_string(covered) + " of " +
                             std::to_string(p.full_shape[static_cast<size_t>(p.shard_dim)]) + " indices");
  }
  return ranges;
}

int64_t gather_staging_numel(const Parameter& p, const std::vector<ShardRange>& ranges) {
  int64_t largest = 0;
  for (const ShardRange& r : ranges) largest = std::max(largest, r.size);
  return static_cast<int64_t>(ranges.size()) * largest *
         (shape_numel(p.shape) / p.shape[static_cast<size_t>(p.shard_dim)]);
}

void gather_full_into(const Parameter& p, const Tensor& shard, Communicator& tp, const std::vector<ShardRange>& ranges,
                      const Tensor& staging, const Tensor& full) {
  check_shape(shard, p.shape, "gather_full: " + p.name);
  check_shape(full, p.full_shape, "gather_full: " + p.name + ": full");
  const int64_t chunk = gather_staging_numel(p, ranges) / tp.size();  // a shard, padded to the largest
  if (staging.numel() < tp.size() * chunk || staging.dtype() != shard.dtype()) {
    throw std::invalid_argument("gather_full: " + p.name + ": staging " + staging.describe() + " is not " +
                                std::to_string(tp.size() * chunk) + " elements of " +
                                std::string(dtype_name(shard.dtype())));
  }
  const Tensor all = staging.reshape({staging.numel()}).slice(0, tp.size() * chunk);
  const Tensor mine = all.slice(tp.rank() * chunk, (tp.rank() + 1) * chunk);
  mine.slice(0, shard.numel()).copy_from(shard.reshape({shard.numel()}));
  tp.all_gather(mine, all);
  const size_t chunk_bytes = static_cast<size_t>(chunk) * dtype_size(shard.dtype());
  for (int r = 0; r < tp.size(); ++r) {
    Shape part_shape = p.full_shape;
    part_shape[static_cast<size_t>(p.shard_dim)] = ranges[static_cast<size_t>(r)].size;
    copy_into_full(
        Tensor::view(static_cast<char*>(all.raw()) + r * chunk_bytes, part_shape, shard.dtype(), all.device()),
        p.shard_dim, ranges[static_cast<size_t>(r)], full);
  }
}

Tensor gather_full(const Parameter& p, const Tensor& shard, Communicator& tp) {
  check_shape(shard, p.shape, "gather_full: " + p.name);
  Tensor full = Tensor::empty(p.full_shape, shard.dtype(), shard.device());
  if (p.shard_dim < 0) {
    full.copy_from(shard);
    return full;
  }
  const std::vector<ShardRange> ranges = shard_ranges(p, tp);
  const Tensor staging = Tensor::zeros({gather_staging_numel(p, ranges)}, shard.dtype(), tp.device());
  gather_full_into(p, shard, tp, ranges, staging, full);
  return full;
}

}  // namespace linea
