// Checks and CPU dispatch of the column-block copies (kernels/ops.h).
#include "kernels/cpu/columns.h"

#include <string>

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
}  // namespace

void column_slice(Tensor out, const Tensor& x, int64_t begin) {
  OpArguments args("column_slice");
  args.floating(x, "x", {kAnyDim, kAnyDim}).floating(out, "out", {x.dim(0), kAnyDim});
  check_block(args, x, out, begin);
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::column_slice(out.data<T>(), x.data<T>(), x.dim(0), x.dim(1), begin, out.dim(1));
  });
}

void column_place(Tensor out, const Tensor& x, int64_t begin) {
  OpArguments args("column_place");
  args.floating(out, "out", {kAnyDim, kAnyDim}).floating(x, "x", {out.dim(0), kAnyDim});
  check_block(args, out, x, begin);
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::column_place(out.data<T>(), x.data<T>(), out.dim(0), out.dim(1), begin, x.dim(1));
  });
}

}  // namespace linea::ops
