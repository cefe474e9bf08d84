#include "kernels/cpu/convert.h"

#include <stdexcept>
#include <string>

#include "kernels/op_arguments.h"
#include "kernels/ops.h"
#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/ops.h"
#endif

namespace linea::ops {

namespace {

// Calls fn(T{}) with the storage type of a floating-point dtype.
template <class Fn>
void with_storage_type(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(float{});
    case DType::f64: return fn(double{});
    case DType::bf16: return fn(bf16{});
    default: throw std::logic_error("with_storage_type: not a floating-point dtype");
  }
}

// The checks of both conversions, in an OpArguments (which also times the call for the op
// profile, kernels/op_profile.h).
OpArguments checked_conversion(const char* op, const Tensor& out, const Tensor& in) {
  OpArguments args(op);
  for (const auto& [t, name] : {std::pair<const Tensor&, const char*>{out, "out"}, {in, "in"}}) {
    if (!t.defined()) args.fail(name, "required tensor is undefined");
    if (t.dtype() != DType::f32 && t.dtype() != DType::f64 && t.dtype() != DType::bf16) {
      args.fail(name, "expected an f32, f64 or bf16 tensor, got " + t.describe());
    }
    if (t.device() == Device::cuda && t.dtype() == DType::f64) {
      args.fail(name, "expected an f32 or bf16 tensor on cuda, got " + t.describe());
    }
  }
  args.typed(out, "out", out.shape(), out.dtype());
  args.typed(in, "in", out.shape(), in.dtype());  // out's shape, on out's device
  return args;
}

void convert_elements(const char* op, Tensor out, const Tensor& in, bool accumulate) {
  const OpArguments args = checked_conversion(op, out, in);
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::convert(out, in, accumulate);
#endif
  with_storage_type(out.dtype(), [&](auto to) {
    with_storage_type(in.dtype(), [&](auto from) {
      using To = decltype(to);
      using From = decltype(from);
      cpu::convert<To, From>(out.data<To>(), in.data<From>(), out.numel(), accumulate);
    });
  });
}

}  // namespace

void convert(Tensor out, const Tensor& in) { convert_elements("convert", out, in, false); }
void add_converted(Tensor y, const Tensor& x) { convert_elements("add_converted", y, x, true); }

}  // namespace linea::ops
