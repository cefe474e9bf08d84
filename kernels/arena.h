// Arena: a bump allocator for the activations of one training step.
// alloc() hands out aligned Tensors; reset() makes all of them invalid at once. The first step
// may spill into extra blocks; reset() then folds them into one block of the high-water size, so
// from the second step on the arena is a single allocation made once. A spill takes a block of an
// eighth of the capacity so far (at least 1 MiB and the request): the first step then holds at
// most about 9/8 of its high water plus the unused tails of its blocks, not up to twice it.
// mark() and release(mark) free for reuse what was handed out after a point while keeping what came
// before it (a forward-only pass releases each block's tensors, keeping the running residual).
#pragma once
#include <memory>
#include <vector>

#include "kernels/tensor.h"

namespace linea {

class Arena {
 public:
  explicit Arena(Device device = Device::cpu, size_t initial_bytes = 0);
  Tensor alloc(Shape shape, DType dtype);
  Tensor zeros(Shape shape, DType dtype);
  void reset();

  // A point in the order of allocations (opaque to callers).
  struct Mark {
    size_t block = 0, offset = 0, used = 0;
  };
  Mark mark() const;
  // Makes what was allocated after `mark` (taken since the last reset) free for reuse; tensors
  // handed out before it stay valid.
  void release(const Mark& mark);
  size_t used_bytes() const { return used_; }
  size_t high_water_bytes() const { return high_water_; }
  size_t capacity_bytes() const;
  Device device() const { return device_; }

 private:
  struct Block {
    std::shared_ptr<void> memory;
    size_t size = 0;
    size_t offset = 0;
  };
  Device device_;
  std::vector<Block> blocks_;
  size_t current_ = 0;  // the block alloc() takes from; the blocks after it are empty
  size_t used_ = 0;
  size_t high_water_ = 0;
};

}  // namespace linea
