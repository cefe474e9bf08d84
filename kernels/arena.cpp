#include "kernels/arena.h"

#include <algorithm>

#include "kernels/device_memory.h"

namespace linea {

namespace {
constexpr size_t kAlignment = 256;
constexpr size_t kMinBlock = size_t(1) << 20;
constexpr size_t kGrowthDivisor = 8;  // a new block is capacity / 8: ≤ 12.5% over what the step needs
size_t align_up(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }
}  // namespace

Arena::Arena(Device device, size_t initial_bytes) : device_(device) {
  if (initial_bytes) blocks_.push_back({allocate_device_memory(initial_bytes, device), initial_bytes, 0});
}

Tensor Arena::alloc(Shape shape, DType dtype) {
  const size_t bytes = align_up(static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype));
  // The current block, else the next (empty) one that fits, else a new one.
  while (current_ < blocks_.size() && blocks_[current_].offset + bytes > blocks_[current_].size) ++current_;
  if (current_ == blocks_.size()) {
    const size_t size = std::max({bytes, kMinBlock, capacity_bytes() / kGrowthDivisor});
    blocks_.push_back({allocate_device_memory(size, device_), size, 0});
  }
  Block& b = blocks_[current_];
  void* p = static_cast<char*>(b.memory.get()) + b.offset;
  b.offset += bytes;
  used_ += bytes;
  high_water_ = std::max(high_water_, used_);
  return Tensor::view(p, std::move(shape), dtype, device_);
}

Tensor Arena::zeros(Shape shape, DType dtype) {
  Tensor t = alloc(std::move(shape), dtype);
  t.zero();
  return t;
}

void Arena::reset() {
  if (blocks_.size() > 1) {
    blocks_.clear();
    blocks_.push_back({allocate_device_memory(high_water_, device_), high_water_, 0});
  }
  for (Block& b : blocks_) b.offset = 0;
  current_ = 0;
  used_ = 0;
}

Arena::Mark Arena::mark() const { return {current_, current_ < blocks_.size() ? blocks_[current_].offset : 0, used_}; }

void Arena::release(const Mark& mark) {
  for (size_t i = mark.block; i < blocks_.size(); ++i) blocks_[i].offset = i == mark.block ? mark.offset : 0;
  current_ = mark.block;
  used_ = mark.used;
}

size_t Arena::capacity_bytes() const {
  size_t total = 0;
  for (const Block& b : blocks_) total += b.size;
  return total;
}

}  // namespace linea
