#include "checkpoint/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "data/atomic_file.h"

namespace linea {

namespace {

const char* safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::bf16: return "BF16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
  }
  return "";
}

// Bytes per element of a safetensors dtype; 0 for one linea does not know.
uint64_t element_bytes(const std::string& dtype) {
  static const std::map<std::string, uint64_t> sizes = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                                                        {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

// IEEE half → float: sign, 5 exponent bits (bias 15), 10 mantissa bits; subnormals, inf and NaN.
float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(float(mantissa), -24);
  } else if (exponent == 31) {
    magnitude = mantissa ? NAN : INFINITY;
  } else {
    magnitude = std::ldexp(float(mantissa | 0x400u), int(exponent) - 25);
  }
  return sign ? -magnitude : magnitude;
}

}  // namespace

void write_safetensors(const std::filesystem::path& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (t.device() != Device::cpu)
      throw std::invalid_argument(path.string() + ": tensor " + name + " is not on the host");
    if (header.contains(name) || name == "__metadata__") {
      throw std::invalid_argument(path.string() + ": tensor name " + name + " given twice or reserved");
    }
    header[name] = {
        {"dtype", safetensors_dtype(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t length = text.size();
  unsigned char length_bytes[8];
  for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<unsigned char>(length >> (8 * i));
  data::AtomicFileWriter out(path);
  out.write(length_bytes, 8);
  out.write(text.data(), text.size());
  for (const auto& [name, t] : tensors) out.write(t.raw(), t.nbytes());
  out.commit();
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  const std::string where = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(where + ": cannot be opened");
  std::error_code ec;
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec || file_size < 8)
    throw std::runtime_error(where + ": not a safetensors file (shorter than its 8-byte header length)");
  unsigned char length_bytes[8];
  in.read(reinterpret_cast<char*>(length_bytes), 8);
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= uint64_t(length_bytes[i]) << (8 * i);
  if (length > file_size - 8) {
    throw std::runtime_error(where + ": header of " + std::to_string(length) + " bytes but the file holds " +
                             std::to_string(file_size - 8) + " after the length (truncated, or not safetensors)");
  }
  std::string text(length, '\0');
  in.read(text.data(), static_cast<std::streamsize>(length));
  const nlohmann::json header = nlohmann::json::parse(text, nullptr, false);
  if (!header.is_object()) throw std::runtime_error(where + ": the header is not a JSON object");
  data_start_ = 8 + length;
  const uint64_t data_size = file_size - data_start_;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) throw std::runtime_error(where + ": __metadata__ is not an object");
      for (const auto& [key, v] : value.items()) {
        if (!v.is_string()) throw std::runtime_error(where + ": __metadata__." + key + " is not a string");
        metadata_[key] = v.get<std::string>();
      }
      continue;
    }
    const std::string bad = where + ": tensor " + name + ": ";
    if (!value.is_object() || !value.contains("dtype") || !value["dtype"].is_string() || !value.contains("shape") ||
        !value["shape"].is_array() || !value.contains("data_offsets") || !value["data_offsets"].is_array() ||
        value["data_offsets"].size() != 2) {
      throw std::runtime_error(bad + "expected {\"dtype\": STRING, \"shape\": [...], \"data_offsets\": [BEGIN, END]}");
    }
    Entry e;
    e.dtype = value["dtype"].get<std::string>();
    const uint64_t bytes = element_bytes(e.dtype);
    if (bytes == 0) throw std::runtime_error(bad + "unknown dtype \"" + e.dtype + "\"");
    uint64_t numel = 1;
    for (const auto& d : value["shape"]) {
      if (!d.is_number_unsigned()) throw std::runtime_error(bad + "the shape holds a non-integer or negative size");
      e.shape.push_back(d.get<int64_t>());
      numel *= d.get<uint64_t>();
    }
    for (const auto& o : value["data_offsets"]) {
      if (!o.is_number_unsigned()) throw std::runtime_error(bad + "data_offsets must be non-negative integers");
    }
    e.begin = value["data_offsets"][0].get<uint64_t>();
    e.end = value["data_offsets"][1].get<uint64_t>();
    if (e.end < e.begin || e.end > data_size) {
      throw std::runtime_error(bad + "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                               ") outside the " + std::to_string(data_size) + " data bytes (truncated file?)");
    }
    if (e.end - e.begin != numel * bytes) {
      throw std::runtime_error(bad + e.dtype + shape_string(e.shape) + " needs " + std::to_string(numel * bytes) +
                               " bytes, data_offsets give " + std::to_string(e.end - e.begin) + " (mislabelled)");
    }
    ranges.emplace_back(e.begin, e.end);
    entries_.emplace(name, std::move(e));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) throw std::runtime_error(where + ": two tensors' data overlap");
  }
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

const SafetensorsFile::Entry& SafetensorsFile::entry(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) throw std::runtime_error(path_.string() + ": no tensor " + name);
  return it->second;
}

const Shape& SafetensorsFile::shape(const std::string& name) const { return entry(name).shape; }
const std::string& SafetensorsFile::dtype(const std::string& name) const { return entry(name).dtype; }

Tensor SafetensorsFile::read_f32(const std::string& name) const {
  const Entry& e = entry(name);
  std::vector<char> bytes(e.end - e.begin);
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(data_start_ + e.begin));
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!in) throw std::runtime_error(path_.string() + ": tensor " + name + ": read failed");
  Tensor out = Tensor::empty(e.shape, DType::f32);
  float* o = out.data<float>();
  const int64_t n = out.numel();
  if (e.dtype == "F32") {
    std::memcpy(o, bytes.data(), bytes.size());
  } else if (e.dtype == "F64") {
    for (int64_t i = 0; i < n; ++i) {
      double v;
      std::memcpy(&v, bytes.data() + 8 * i, 8);
      o[i] = static_cast<float>(v);
    }
  } else if (e.dtype == "BF16" || e.dtype == "F16") {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      bf16 b;
      b.bits = h;
      o[i] = e.dtype == "BF16" ? static_cast<float>(b) : half_to_float(h);
    }
  } else {
    throw std::runtime_error(path_.string() + ": tensor " + name + " is " + e.dtype + ", expected a float dtype");
  }
  return out;
}

}  // namespace linea
