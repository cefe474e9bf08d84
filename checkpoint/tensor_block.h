// Blocks of a full logical tensor. A checkpoint stores each tensor as one or more blocks (the
// slices the ranks held when saving: a dataset with the attributes `full_shape` and `offset`), and
// a reader assembles whatever block a rank asks for from the stored blocks that overlap it — that
// is all "resharding" takes. A block is the box [offset[d], offset[d] + shape[d]) in every
// dimension d of the full tensor; tensors are row-major.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/tensor.h"

namespace linea {

struct TensorBlock {
  std::vector<int64_t> offset;
  Shape shape;
};

// Whether `block` lies inside a tensor of `full_shape` (same rank, offsets >= 0, ends <= sizes).
bool block_inside(const TensorBlock& block, const Shape& full_shape);
// Elements the two blocks (of one full tensor) have in common.
int64_t block_overlap_numel(const TensorBlock& a, const TensorBlock& b);
// "[0:4, 8:16]": the block's ranges, for messages.
std::string block_string(const TensorBlock& block);

// Copies the elements where the blocks of src (at src_offset) and dst (at dst_offset) overlap,
// from src into dst; both contiguous CPU tensors of one dtype and rank. Returns the number copied.
int64_t copy_block_overlap(const Tensor& src, const std::vector<int64_t>& src_offset, const Tensor& dst,
                           const std::vector<int64_t>& dst_offset);

}  // namespace linea
