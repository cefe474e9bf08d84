#include "checkpoint/tensor_block.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace linea {

bool block_inside(const TensorBlock& block, const Shape& full_shape) {
  if (block.offset.size() != full_shape.size() || block.shape.size() != full_shape.size()) return false;
  for (size_t d = 0; d < full_shape.size(); ++d) {
    if (block.offset[d] < 0 || block.shape[d] < 0 || block.offset[d] + block.shape[d] > full_shape[d]) return false;
  }
  return true;
}

int64_t block_overlap_numel(const TensorBlock& a, const TensorBlock& b) {
  int64_t n = 1;
  for (size_t d = 0; d < a.shape.size(); ++d) {
    const int64_t lo = std::max(a.offset[d], b.offset[d]);
    const int64_t hi = std::min(a.offset[d] + a.shape[d], b.offset[d] + b.shape[d]);
    if (hi <= lo) return 0;
    n *= hi - lo;
  }
  return n;
}

std::string block_string(const TensorBlock& block) {
  std::string s = "[";
  for (size_t d = 0; d < block.shape.size(); ++d) {
    if (d) s += ", ";
    s += std::to_string(block.offset[d]) + ":" + std::to_string(block.offset[d] + block.shape[d]);
  }
  return s + "]";
}

int64_t copy_block_overlap(const Tensor& src, const std::vector<int64_t>& src_offset, const Tensor& dst,
                           const std::vector<int64_t>& dst_offset) {
  const size_t rank = src.shape().size();
  if (dst.shape().size() != rank || src_offset.size() != rank || dst_offset.size() != rank ||
      src.dtype() != dst.dtype() || src.device() != Device::cpu || dst.device() != Device::cpu) {
    throw std::invalid_argument("copy_block_overlap: blocks " + src.describe() + " and " + dst.describe() +
                                " need one dtype, the CPU and one offset per dimension");
  }
  if (rank == 0) {
    std::memcpy(dst.raw(), src.raw(), dtype_size(src.dtype()));
    return 1;
  }
  // The overlap [lo, hi) in full-tensor coordinates.
  std::vector<int64_t> lo(rank), hi(rank);
  for (size_t d = 0; d < rank; ++d) {
    lo[d] = std::max(src_offset[d], dst_offset[d]);
    hi[d] = std::min(src_offset[d] + src.shape()[d], dst_offset[d] + dst.shape()[d]);
    if (hi[d] <= lo[d]) return 0;
  }
  const size_t element = dtype_size(src.dtype());
  const int64_t run = hi[rank - 1] - lo[rank - 1];  // contiguous along the last dimension
  // Row-major position of full-tensor index `at` inside a block at `offset` with `shape`.
  const auto position = [&](const std::vector<int64_t>& at, const std::vector<int64_t>& offset, const Shape& shape) {
    int64_t p = 0;
    for (size_t d = 0; d < rank; ++d) p = p * shape[d] + (at[d] - offset[d]);
    return p;
  };
  std::vector<int64_t> at = lo;
  int64_t copied = 0;
  while (true) {
    std::memcpy(static_cast<char*>(dst.raw()) + position(at, dst_offset, dst.shape()) * element,
                static_cast<const char*>(src.raw()) + position(at, src_offset, src.shape()) * element,
                static_cast<size_t>(run) * element);
    copied += run;
    // Next index over dimensions 0 … rank−2 (the last is covered by the run).
    size_t d = rank - 1;
    while (d > 0) {
      --d;
      if (++at[d] < hi[d]) break;
      at[d] = lo[d];
      if (d == 0) return copied;
    }
    if (rank == 1) return copied;
  }
}

}  // namespace linea
