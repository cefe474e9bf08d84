// Tensor: a shape, an element type, a device and a pointer to contiguous row-major storage.
// Storage is shared (copies of a Tensor alias the same memory); a Tensor made by `view` or by an
// Arena does not own its memory. Shapes have up to 6 dimensions.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "kernels/dtype.h"

namespace linea {

enum class Device : uint8_t { cpu, cuda };
std::string_view device_name(Device device);

using Shape = std::vector<int64_t>;
std::string shape_string(const Shape& shape);
int64_t shape_numel(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  // Allocates owned, uninitialised storage.
  static Tensor empty(Shape shape, DType dtype, Device device = Device::cpu);
  static Tensor zeros(Shape shape, DType dtype, Device device = Device::cpu);
  // Wraps memory owned by someone else.
  static Tensor view(void* data, Shape shape, DType dtype, Device device = Device::cpu);

  bool defined() const { return data_ != nullptr || !shape_.empty(); }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_.at(i < 0 ? i + ndim() : i); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }

  void* raw() const { return data_; }
  // Typed access; throws if T does not match dtype().
  template <class T> T* data() const {
    check_dtype(dtype_of<T>());
    return static_cast<T*>(data_);
  }

  // Same storage, new shape with the same element count.
  Tensor reshape(Shape shape) const;
  // Rows [begin, end) of the first dimension, sharing storage.
  Tensor slice(int64_t begin, int64_t end) const;
  // Sets every byte to zero.
  void zero();
  // Deep copy to host memory (identity copy for CPU tensors).
  Tensor clone() const;
  void copy_from(const Tensor& src);

  std::string describe() const;  // "f32[2, 3] cpu"

 private:
  void check_dtype(DType expected) const;
  std::shared_ptr<void> storage_;
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
};

// Throws std::invalid_argument naming `what` unless t has exactly this shape.
void check_shape(const Tensor& t, const Shape& expected, std::string_view what);

}  // namespace linea
