#include "kernels/cpu/embedding.h"

#include "kernels/op_arguments.h"
#include "kernels/ops.h"

namespace linea::ops {

void embedding_forward(Tensor out, const Tensor& table, const Tensor& ids) {
  OpArguments args("embedding_forward");
  args.floating(table, "table", {kAnyDim, kAnyDim}).indices(ids, "ids", {kAnyDim});
  const int64_t n = ids.dim(0), v = table.dim(0), d = table.dim(1);
  args.floating(out, "out", {n, d});
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    args.require_indices_in_range(ids, "ids", 0, v);
    cpu::embedding_forward(out.data<T>(), table.data<T>(), ids.data<int32_t>(), n, d);
  });
}

void embedding_backward(Tensor dtable, const Tensor& dout, const Tensor& ids) {
  OpArguments args("embedding_backward");
  args.floating(dtable, "dtable", {kAnyDim, kAnyDim}).indices(ids, "ids", {kAnyDim});
  const int64_t n = ids.dim(0), v = dtable.dim(0), d = dtable.dim(1);
  args.floating(dout, "dout", {n, d});
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    args.require_indices_in_range(ids, "ids", 0, v);
    cpu::embedding_backward(dtable.data<T>(), dout.data<T>(), ids.data<int32_t>(), n, d);
  });
}

}  // namespace linea::ops
