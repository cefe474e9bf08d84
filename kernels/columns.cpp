// Checks and dispatch of the column-block copies (kernels/ops.h): on the CPU the loops of
// kernels/cpu/columns.h; on CUDA (f32 or bf16) one strided copy of N runs of c values
// (copy_device_memory_2d: cudaMemcpy2D, on the default stream as every kernel).
#include "kernels/cpu/columns.h"

#include <string>

#include "kernels/device_memory.h"
#include "kernels/dtype.h"
#include "kernels/op_arguments.h"
#include "kernels/ops.h"

namespace linea::ops {

namespace {
// Checks that the block [begin, begin + block.dim(1)) lies inside full's columns.
void check_block(OpArguments& args, const Tensor& full, const Tensor& block, int64_t begin) {
  args.require(begin >= 0 && begin + block.dim(1) <= full.dim(1), "begin",
               "columns [" + std::to_string(begin) + ", " + std::to_string(begin + block.dim(1)) +
                   ") are not inside [0, " + std::to_string(full.dim(1)) + ")");
}

// Row n of the block [N, c] ↔ columns [begin, begin + c) of row n of full [N, W], on CUDA.
void copy_block_on_cuda(const Tensor& full, const Tensor& block, int64_t begin, bool to_block) {
  const size_t value = dtype_size(full.dtype()), full_pitch = static_cast<size_t>(full.dim(1)) * value;
  const size_t block_pitch = static_cast<size_t>(block.dim(1)) * value, rows = static_cast<size_t>(full.dim(0));
  char* in_full = static_cast<char*>(full.raw()) + static_cast<size_t>(begin) * value;
  if (to_block) {
    copy_device_memory_2d(block.raw(), block_pitch, Device::cuda, in_full, full_pitch, Device::cuda, block_pitch, rows);
  } else {
    copy_device_memory_2d(in_full, full_pitch, Device::cuda, block.raw(), block_pitch, Device::cuda, block_pitch, rows);
  }
}
}  // namespace

void column_slice(Tensor out, const Tensor& x, int64_t begin) {
  OpArguments args("column_slice");
  args.floating(x, "x", {kAnyDim, kAnyDim}).floating(out, "out", {x.dim(0), kAnyDim});
  check_block(args, x, out, begin);
  if (args.on_cuda()) return copy_block_on_cuda(x, out, begin, /*to_block=*/true);
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::column_slice(out.data<T>(), x.data<T>(), x.dim(0), x.dim(1), begin, out.dim(1));
  });
}

void column_place(Tensor out, const Tensor& x, int64_t begin) {
  OpArguments args("column_place");
  args.floating(out, "out", {kAnyDim, kAnyDim}).floating(x, "x", {out.dim(0), kAnyDim});
  check_block(args, out, x, begin);
  if (args.on_cuda()) return copy_block_on_cuda(out, x, begin, /*to_block=*/false);
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::column_place(out.data<T>(), x.data<T>(), out.dim(0), out.dim(1), begin, x.dim(1));
  });
}

}  // namespace linea::ops
