#include "model/wide_gates.h"

#include <stdexcept>
#include <string>

#include "kernels/ops.h"

namespace linea {

Tensor widened(StepContext& ctx, const Tensor& x) {
  if (x.dtype() == ctx.statistics_dtype()) return x;
  Tensor wide = ctx.scratch.alloc(x.shape(), ctx.statistics_dtype());
  ops::convert(wide, x);
  return wide;
}

Tensor narrowed(StepContext& ctx, const Tensor& x) {
  if (x.dtype() == ctx.dtype) return x;
  Tensor narrow = ctx.temporary(x.shape());
  ops::convert(narrow, x);
  return narrow;
}

GateParameter gate_parameter(const StepContext& ctx, const Parameter& p) {
  const DType wanted = ctx.statistics_dtype();
  if (p.compute.dtype() == wanted) return {p.compute, p.compute_grad};
  if (p.value.dtype() == wanted) return {p.value, p.grad};
  throw std::invalid_argument(p.name + ": a " + std::string(dtype_name(ctx.dtype)) + " step forms this gate in " +
                              std::string(dtype_name(wanted)) + " and needs " + std::string(dtype_name(wanted)) +
                              " master weights, got " + std::string(dtype_name(p.value.dtype())));
}

}  // namespace linea
