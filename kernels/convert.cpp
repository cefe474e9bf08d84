#include "kernels/cpu/convert.h"

#include <stdexcept>
#include <string>

#include "kernels/op_profile.h"
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

void check_conversion(const char* op, const Tensor& out, const Tensor& in) {
  const auto fail = [&](const std::string& name, const std::string& message) {
    throw std::invalid_argument(std::string(op) + ": " + name + ": " + message);
  };
  for (const auto& [t, name] : {std::pair<const Tensor&, const char*>{out, "out"}, {in, "in"}}) {
    if (!t.defined()) fail(name, "required tensor is undefined");
    if (t.dtype() != DType::f32 && t.dtype() != DType::f64 && t.dtype() != DType::bf16) {
      fail(name, "expected an f32, f64 or bf16 tensor, got " + t.describe());
    }
    if (t.device() == Device::cuda && t.dtype() == DType::f64) {
      fail(name, "expected an f32 or bf16 tensor on cuda, got " + t.describe());
    }
  }
  if (in.shape() != out.shape()) fail("in", "expected shape " + shape_string(out.shape()) + ", got " + in.describe());
  if (in.device() != out.device()) fail("in", "expected a tensor on out's device, got " + in.describe());
}

// Timed by the op profile as "<in's dtype> to <out's dtype> out[shape]" (kernels/op_profile.h).
void convert_elements(const char* op, Tensor out, const Tensor& in, bool accumulate) {
  OpSpan span;
  check_conversion(op, out, in);
  const bool on_cuda = out.device() == Device::cuda;
  if (on_cuda) {
#ifdef LINEA_WITH_CUDA
    cuda::convert(out, in, accumulate);
#endif
  } else {
    with_storage_type(out.dtype(), [&](auto to) {
      with_storage_type(in.dtype(), [&](auto from) {
        using To = decltype(to);
        using From = decltype(from);
        cpu::convert<To, From>(out.data<To>(), in.data<From>(), out.numel(), accumulate);
      });
    });
  }
  if (span.timed()) {
    span.end(op,
             std::string(dtype_name(in.dtype())) + " to " + std::string(dtype_name(out.dtype())) + " out" +
                 shape_string(out.shape()),
             on_cuda);
  }
}

}  // namespace

void convert(Tensor out, const Tensor& in) { convert_elements("convert", out, in, false); }
void add_converted(Tensor y, const Tensor& x) { convert_elements("add_converted", y, x, true); }

}  // namespace linea::ops
