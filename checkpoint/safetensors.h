// safetensors (Hugging Face's tensor file, https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON {"NAME": {"dtype": "F32", "shape": [...],
// "data_offsets": [BEGIN, END]}, ..., "__metadata__": {"KEY": "VALUE"}} (offsets relative to the
// byte after the header; the header padded with spaces to a multiple of 8), then the data, row
// major, little endian.
//
// write_safetensors writes f32, f64, bf16, i32 and i64 host tensors through data/atomic_file.h
// (temp file + rename: a failed write leaves nothing behind). SafetensorsFile reads one, checking
// the header length against the file size, the JSON, every entry's dtype, shape and offsets
// (inside the data, covering exactly numel × element size bytes, not overlapping); each error is
// a std::runtime_error naming the file and, where one is at fault, the tensor. read() returns f32
// (F32, F64, BF16 and F16 are converted) for models that load them.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/tensor.h"

namespace linea {

void write_safetensors(const std::filesystem::path& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return entries_.count(name) > 0; }
  const Shape& shape(const std::string& name) const;
  const std::string& dtype(const std::string& name) const;  // "F32", "BF16", …
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The tensor as f32 (F32, F64, BF16, F16 only).
  Tensor read_f32(const std::string& name) const;

 private:
  struct Entry {
    std::string dtype;
    Shape shape;
    uint64_t begin = 0, end = 0;
  };
  const Entry& entry(const std::string& name) const;

  std::filesystem::path path_;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
  uint64_t data_start_ = 0;
};

}  // namespace linea
