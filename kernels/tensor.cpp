#include "kernels/tensor.h"

#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "kernels/device_memory.h"

namespace linea {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
  }
  return "?";
}

std::string_view device_name(Device device) { return device == Device::cpu ? "cpu" : "cuda"; }

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const Shape& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  for (int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("Tensor::empty: negative dimension in " + shape_string(shape));
  }
  if (shape.size() > 6) throw std::invalid_argument("Tensor::empty: more than 6 dimensions");
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = allocate_device_memory(std::max<size_t>(t.nbytes(), 1), device);
  t.data_ = t.storage_.get();
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype, Device device) {
  Tensor t = empty(std::move(shape), dtype, device);
  t.zero();
  return t;
}

Tensor Tensor::view(void* data, Shape shape, DType dtype, Device device) {
  Tensor t;
  t.data_ = data;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  if (shape_numel(shape) != numel()) {
    throw std::invalid_argument("Tensor::reshape: " + shape_string(shape_) + " cannot become " + shape_string(shape));
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  if (shape_.empty() || begin < 0 || end < begin || end > shape_[0]) {
    throw std::out_of_range("Tensor::slice: rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                            ") of " + describe());
  }
  Tensor t = *this;
  const int64_t row = shape_[0] ? numel() / shape_[0] : 0;
  t.data_ = static_cast<char*>(data_) + begin * row * static_cast<int64_t>(dtype_size(dtype_));
  t.shape_[0] = end - begin;
  return t;
}

void Tensor::zero() { fill_device_memory_zero(data_, nbytes(), device_); }

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, Device::cpu);
  copy_device_memory(t.data_, Device::cpu, data_, device_, nbytes());
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  if (src.shape_ != shape_ || src.dtype_ != dtype_) {
    throw std::invalid_argument("Tensor::copy_from: " + src.describe() + " into " + describe());
  }
  copy_device_memory(data_, device_, src.data_, src.device_, nbytes());
}

std::string Tensor::describe() const {
  return std::string(dtype_name(dtype_)) + shape_string(shape_) + " " + std::string(device_name(device_));
}

void Tensor::check_dtype(DType expected) const {
  if (expected != dtype_) {
    throw std::invalid_argument("Tensor: accessed " + describe() + " as " + std::string(dtype_name(expected)));
  }
}

void check_shape(const Tensor& t, const Shape& expected, std::string_view what) {
  if (t.shape() != expected) {
    throw std::invalid_argument(std::string(what) + ": expected shape " + shape_string(expected) + ", got " +
                                shape_string(t.shape()));
  }
}

}  // namespace linea
