#include "kernels/op_arguments.h"

namespace linea::ops {

namespace {
bool shape_matches(const Shape& got, const Shape& expected) {
  if (got.size() != expected.size()) return false;
  for (size_t i = 0; i < got.size(); ++i) {
    if (expected[i] != kAnyDim && expected[i] != got[i]) return false;
  }
  return true;
}

std::string pattern_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i ? ", " : "");
    s += shape[i] == kAnyDim ? "*" : std::to_string(shape[i]);
  }
  return s + "]";
}
}  // namespace

OpArguments::~OpArguments() {
  if (!span_.timed()) return;
  const std::string dtype = dtype_ ? std::string(dtype_name(*dtype_)) + " " : profiled_dtype_;
  span_.end(op_, dtype + profiled_shapes_, on_cuda());
}

void OpArguments::fail(std::string_view name, const std::string& message) const {
  throw std::invalid_argument(op_ + ": " + std::string(name) + ": " + message);
}

void OpArguments::layout(const SeqLayout& seqs, int64_t tokens) const {
  try {
    seqs.validate(tokens);
  } catch (const std::invalid_argument& e) {
    fail("seqs", e.what());
  }
}

void OpArguments::check_shape(const Tensor& t, std::string_view name, const Shape& shape) const {
  if (!shape_matches(t.shape(), shape)) {
    fail(name, "expected shape " + pattern_string(shape) + ", got " + shape_string(t.shape()));
  }
}

void OpArguments::check_device(const Tensor& t, std::string_view name) {
  if (span_.timed() && profiled_tensors_ < 2) {
    if (profiled_tensors_ == 0) profiled_dtype_ = std::string(dtype_name(t.dtype())) + " ";
    if (profiled_tensors_++) profiled_shapes_ += ' ';
    profiled_shapes_.append(name).append(shape_string(t.shape()));
  }
  if (!device_) {
    device_ = t.device();
    device_from_ = name;
  } else if (t.device() != *device_) {
    fail(name, "expected a " + std::string(device_name(*device_)) + " tensor (like " + device_from_ + "), got " +
                   t.describe());
  }
}

OpArguments& OpArguments::saved_buffer(const Tensor& saved, size_t bytes, std::string_view sizer) {
  if (!saved.defined()) return *this;
  require(bytes > 0, "saved", "this call saves nothing (" + std::string(sizer) + " = 0): leave it undefined");
  if (!device_) fail("saved", "no tensor before it gives the call's device");
  require(saved.device() == *device_, "saved",
          "expected on " + std::string(device_name(*device_)) + ", got " + saved.describe());
  require(saved.nbytes() >= bytes, "saved",
          "expected at least " + std::to_string(bytes) + " bytes, got " + saved.describe());
  return *this;
}

OpArguments& OpArguments::floating(const Tensor& t, std::string_view name, const Shape& shape) {
  if (!t.defined()) fail(name, "required tensor is undefined");
  return optional_floating(t, name, shape);
}

OpArguments& OpArguments::optional_floating(const Tensor& t, std::string_view name, const Shape& shape) {
  if (!t.defined()) return *this;
  const bool on_cpu = t.device() == Device::cpu;
  const DType wide = on_cpu ? DType::f64 : DType::bf16;  // the dtype allowed beside f32 on t's device
  if (t.dtype() != DType::f32 && t.dtype() != wide) {
    fail(name, std::string("expected an f32 or ") + std::string(dtype_name(wide)) + " tensor, got " + t.describe());
  }
  if (!dtype_) {
    dtype_ = t.dtype();
    dtype_from_ = name;
  } else if (t.dtype() != *dtype_) {
    fail(name, "expected " + std::string(dtype_name(*dtype_)) + " (like " + dtype_from_ + "), got " + t.describe());
  }
  check_device(t, name);
  check_shape(t, name, shape);
  return *this;
}

OpArguments& OpArguments::statistics(const Tensor& t, std::string_view name, const Shape& shape) {
  if (!t.defined()) fail(name, "required tensor is undefined");
  if (!dtype_) fail(name, "no floating-point argument precedes it");
  const DType expected = *dtype_ == DType::bf16 ? DType::f32 : *dtype_;
  if (t.dtype() != expected) {
    fail(name, "expected " + std::string(dtype_name(expected)) + " (statistics of " + std::string(dtype_name(*dtype_)) +
                   " " + dtype_from_ + "), got " + t.describe());
  }
  check_device(t, name);
  check_shape(t, name, shape);
  return *this;
}

OpArguments& OpArguments::indices(const Tensor& t, std::string_view name, const Shape& shape) {
  if (!t.defined()) fail(name, "required tensor is undefined");
  if (t.dtype() != DType::i32) fail(name, "expected an i32 tensor, got " + t.describe());
  check_device(t, name);
  check_shape(t, name, shape);
  return *this;
}

OpArguments& OpArguments::typed(const Tensor& t, std::string_view name, const Shape& shape, DType dtype) {
  if (!t.defined()) fail(name, "required tensor is undefined");
  return optional_typed(t, name, shape, dtype);
}

OpArguments& OpArguments::optional_typed(const Tensor& t, std::string_view name, const Shape& shape, DType dtype) {
  if (!t.defined()) return *this;
  check_device(t, name);
  if (t.dtype() != dtype) fail(name, "expected " + std::string(dtype_name(dtype)) + ", got " + t.describe());
  check_shape(t, name, shape);
  return *this;
}

OpArguments& OpArguments::absent(const Tensor& t, std::string_view name, std::string_view why) {
  if (t.defined()) fail(name, "must be undefined " + std::string(why));
  return *this;
}

int64_t OpArguments::head_width(const Tensor& t, std::string_view name, int64_t heads,
                                std::string_view heads_name) const {
  require(heads >= 1, heads_name, "expected at least one head, got " + std::to_string(heads));
  const int64_t width = t.dim(-1);
  require(width % heads == 0, name,
          "width " + std::to_string(width) + " is not a multiple of " + std::string(heads_name) + " = " +
              std::to_string(heads));
  return width / heads;
}

void OpArguments::require_indices_in_range(const Tensor& t, std::string_view name, int64_t lo, int64_t hi,
                                           std::optional<int64_t> allowed) const {
  const Tensor host = t.device() == Device::cpu ? t : t.clone();
  const int32_t* v = host.data<int32_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if ((v[i] < lo || v[i] >= hi) && !(allowed && v[i] == *allowed)) {
      fail(name, "entry " + std::to_string(i) + " is " + std::to_string(v[i]) + ", expected a value in [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + ")" +
                     (allowed ? " or " + std::to_string(*allowed) : std::string()));
    }
  }
}

}  // namespace linea::ops
