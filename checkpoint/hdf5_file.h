// Hdf5File: the project's one wrapper over the HDF5 C API (serial HDF5 ≥ 1.10.7).
//
// An open HDF5 file (closed by the destructor; move-only). Datasets are read and written whole,
// from and into linea::Tensor: f32, f64, i32 and i64 map to the native HDF5 types; bf16 is stored
// as uint16 with the dataset attribute `linea_dtype = "bf16"` (so other tools still see the raw
// bits). Dataset names may contain '/' (intermediate groups are created on write). Attributes
// (string, int64, int64 array) live on a dataset or, with object "" or "/", on the file itself.
// Every HDF5 failure becomes a std::runtime_error naming the file, the dataset/attribute and the
// operation, with HDF5's own reason; HDF5's automatic error printing is turned off. Misuse (bad
// names, wrong dtypes, unsupported stored types) throws std::invalid_argument / runtime_error too.
// Different threads may use different files: HDF5 (built thread-safe, as Debian's is) serialises
// its calls, so one thread's long write delays another thread's HDF5 calls.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/tensor.h"

namespace linea {

// Shape and element type of a stored dataset, known without reading its data.
struct Hdf5DatasetInfo {
  Shape shape;
  DType dtype = DType::f32;
};

class Hdf5File {
 public:
  enum class Access { read_only, read_write };
  enum class Create { exclusive, truncate };  // exclusive: fail if the file already exists

  static Hdf5File open(const std::filesystem::path& path, Access access = Access::read_only);
  static Hdf5File create(const std::filesystem::path& path, Create mode = Create::exclusive);

  Hdf5File(Hdf5File&& other) noexcept;
  Hdf5File& operator=(Hdf5File&& other) noexcept;
  Hdf5File(const Hdf5File&) = delete;
  Hdf5File& operator=(const Hdf5File&) = delete;
  ~Hdf5File();  // closes quietly; call close() to see errors

  const std::filesystem::path& path() const { return path_; }
  bool is_open() const { return file_id_ >= 0; }
  // Flushes and closes; throws if HDF5 reports an error. A no-op on a closed file.
  void close();
  // Pushes HDF5's buffers to the operating system (not to disk: see fsync in the caller).
  void flush();

  bool has_dataset(std::string_view name) const;
  // Every dataset in the file, as full paths without the leading '/', sorted by name.
  std::vector<std::string> dataset_names() const;
  Hdf5DatasetInfo dataset_info(std::string_view name) const;

  // Creates dataset `name` holding a copy of `tensor` (CUDA tensors are copied to the host first).
  // Fails if `name` already exists.
  void write(std::string_view name, const Tensor& tensor);
  // Reads dataset `name` into a new CPU tensor with its stored shape and dtype.
  Tensor read(std::string_view name) const;
  // Reads a floating-point dataset (f32, f64 or bf16) converted to `dtype` (f32, f64 or bf16).
  Tensor read(std::string_view name, DType dtype) const;

  // Attributes of `object` (a dataset or group path; "" or "/" for the file). Setting replaces.
  void set_attribute(std::string_view object, std::string_view name, std::string_view value);
  void set_attribute(std::string_view object, std::string_view name, int64_t value);
  void set_attribute(std::string_view object, std::string_view name, const std::vector<int64_t>& values);
  bool has_attribute(std::string_view object, std::string_view name) const;
  std::string string_attribute(std::string_view object, std::string_view name) const;
  int64_t int_attribute(std::string_view object, std::string_view name) const;
  std::vector<int64_t> int_array_attribute(std::string_view object, std::string_view name) const;

 private:
  Hdf5File(std::filesystem::path path, int64_t file_id, bool writable);
  void require_open(std::string_view operation) const;
  void require_writable(std::string_view operation) const;

  std::filesystem::path path_;
  int64_t file_id_ = -1;  // an HDF5 hid_t
  bool writable_ = false;
};

}  // namespace linea
