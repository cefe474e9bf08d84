#include "model/mixer_problem_file.h"

#include <cmath>
#include <stdexcept>
#include <utility>

namespace linea {

namespace {

// "[1, 0, 3]": the position of element `flat` of a row-major tensor of this shape.
std::string index_string(const Shape& shape, int64_t flat) {
  Shape index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_string(index);
}

// The first element that is not finite (or, for log decays, positive) and its value; index −1 if none.
template <class T>
std::pair<int64_t, double> first_invalid(const Tensor& t, bool log_decay) {
  const T* x = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (!std::isfinite(x[i]) || (log_decay && x[i] > 0)) return {i, static_cast<double>(x[i])};
  }
  return {-1, 0.0};
}

}  // namespace

std::string dtype_shape_string(DType dtype, const Shape& shape) {
  return std::string(dtype_name(dtype)) + shape_string(shape);
}

MixerProblemFile::MixerProblemFile(const std::filesystem::path& path, std::string mixer)
    : file_(Hdf5File::open(path)), mixer_(std::move(mixer)) {}

void MixerProblemFile::fail(std::string_view dataset, std::string_view problem) const {
  throw std::invalid_argument("mixer input '" + file_.path().string() + "', dataset '" + std::string(dataset) +
                              "': " + std::string(problem));
}

Hdf5DatasetInfo MixerProblemFile::require(const std::string& name, DType dtype, std::string_view expected) const {
  if (!file_.has_dataset(name)) fail(name, "missing; " + mixer_ + " needs " + std::string(expected));
  const Hdf5DatasetInfo info = file_.dataset_info(name);
  if (info.dtype != dtype) {
    fail(name, "expected " + std::string(expected) + ", got " + dtype_shape_string(info.dtype, info.shape));
  }
  return info;
}

Shape MixerProblemFile::require_leading(const std::string& name, size_t rank, std::string_view layout) const {
  const Hdf5DatasetInfo info = require(name, DType::f32, "f32" + std::string(layout));
  if (info.shape.size() != rank) {
    fail(name, "expected rank " + std::to_string(rank) + " " + std::string(layout) + ", got " +
                   dtype_shape_string(info.dtype, info.shape));
  }
  for (int64_t d : info.shape) {
    if (d <= 0) {
      fail(name, "every dimension of " + std::string(layout) + " must be positive, got " + shape_string(info.shape));
    }
  }
  return info.shape;
}

void MixerProblemFile::check(const DatasetRule& rule) const {
  const bool present = file_.has_dataset(rule.name);
  if (rule.presence == Presence::forbidden) {
    if (present) fail(rule.name, "does not belong to " + mixer_ + ": " + rule.layout);
    return;
  }
  const std::string expected = dtype_shape_string(DType::f32, rule.shape) + " (" + rule.layout + ")";
  if (!present) {
    if (rule.presence == Presence::required) fail(rule.name, "missing; " + mixer_ + " needs " + expected);
    return;
  }
  const Hdf5DatasetInfo info = file_.dataset_info(rule.name);
  if (info.dtype != DType::f32 || info.shape != rule.shape) {
    fail(rule.name, "expected " + expected + ", got " + dtype_shape_string(info.dtype, info.shape));
  }
}

SeqLayout MixerProblemFile::sequences(const std::string& leading, const Shape& leading_shape, bool& packed) const {
  const int64_t batch = leading_shape[0], seq_len = leading_shape[1];
  packed = file_.has_dataset("cu_seqlens");
  if (!packed) return SeqLayout::uniform(batch, seq_len);
  const Hdf5DatasetInfo cu = require("cu_seqlens", DType::i64, "i64[S + 1]");
  if (cu.shape.size() != 1 || cu.shape[0] < 2) {
    fail("cu_seqlens", "expected i64[S + 1] with S ≥ 1, got " + dtype_shape_string(cu.dtype, cu.shape));
  }
  if (batch != 1) {
    fail("cu_seqlens", "packed sequences need B = 1, but " + leading + " is " + shape_string(leading_shape));
  }
  const Tensor offsets = file_.read("cu_seqlens");
  SeqLayout seqs;
  seqs.cu_seqlens.assign(offsets.data<int64_t>(), offsets.data<int64_t>() + offsets.numel());
  try {
    seqs.validate(seq_len);
  } catch (const std::invalid_argument& e) {
    fail("cu_seqlens", std::string(e.what()) + " (T of " + leading + ")");
  }
  return seqs;
}

void MixerProblemFile::check_head_optionals(const HeadProblemShape& shape) const {
  const int64_t b = shape.batch, t = shape.seq_len, h = shape.heads, k = shape.key_dim, v = shape.value_dim;
  const int64_t s = shape.num_states();
  const std::string state_layout = shape.state_layout();
  for (const DatasetRule& rule : {DatasetRule{"h0", Presence::optional, {s, h, k, v}, state_layout},
                                  DatasetRule{"do", Presence::optional, {b, t, h, v}, "[B, T, H, V]"},
                                  DatasetRule{"dht", Presence::optional, {s, h, k, v}, state_layout}}) {
    check(rule);
  }
}

void MixerProblemFile::read_head_optionals(const HeadProblemShape& shape, DType compute, Tensor& h0, Tensor& d_o,
                                           Tensor& dht) const {
  const int64_t n = shape.num_tokens(), h = shape.heads, k = shape.key_dim, v = shape.value_dim;
  const int64_t s = shape.num_states();
  if (has("h0")) h0 = read("h0", compute, {s, h, k, v});
  d_o = has("do") ? read("do", compute, {n, h, v}) : Tensor::zeros({n, h, v}, compute);
  if (has("dht")) dht = read("dht", compute, {s, h, k, v});
}

HeadRunBuffers::HeadRunBuffers(const HeadProblemShape& shape, const Tensor& q) : device(q.device()) {
  const DType state = device == Device::cuda ? DType::f32 : q.dtype();
  const int64_t h = shape.heads, k = shape.key_dim, v = shape.value_dim, s = shape.num_states();
  o = Tensor::empty({shape.num_tokens(), h, v}, q.dtype(), device);
  ht = Tensor::empty({s, h, k, v}, state, device);
  dh0 = Tensor::empty({s, h, k, v}, state, device);
}

Tensor HeadRunBuffers::like(const Tensor& t) const {
  return t.defined() ? Tensor::empty(t.shape(), t.dtype(), device) : Tensor();
}

std::string HeadProblemShape::summary() const {
  return "B=" + std::to_string(batch) + " T=" + std::to_string(seq_len) + " H=" + std::to_string(heads) +
         " K=" + std::to_string(key_dim) + " V=" + std::to_string(value_dim) + ", " + std::to_string(num_states()) +
         " sequences";
}

std::string HeadProblemShape::state_layout() const {
  return packed ? "[S, H, K, V], S from cu_seqlens" : "[B, H, K, V]";
}

HeadProblemShape MixerProblemFile::head_problem_shape() const {
  HeadProblemShape p;
  const Shape q = require_leading("q", 4, "[B, T, H, K]");
  p.batch = q[0], p.seq_len = q[1], p.heads = q[2], p.key_dim = q[3];
  const std::string v_expected = "f32[" + std::to_string(p.batch) + ", " + std::to_string(p.seq_len) + ", " +
                                 std::to_string(p.heads) + ", V] ([B, T, H, V] with B, T, H from q)";
  const Hdf5DatasetInfo v = require("v", DType::f32, v_expected);
  if (v.shape.size() != 4 || v.shape[0] != p.batch || v.shape[1] != p.seq_len || v.shape[2] != p.heads ||
      v.shape[3] <= 0) {
    fail("v", "expected " + v_expected + ", got " + dtype_shape_string(v.dtype, v.shape));
  }
  p.value_dim = v.shape[3];
  p.seqs = sequences("q", q, p.packed);
  return p;
}

Tensor MixerProblemFile::read(const std::string& name, DType compute, Shape flat, bool log_decay) const {
  if (compute != DType::f32 && compute != DType::f64) {
    throw std::invalid_argument("MixerProblemFile::read: compute dtype must be f32 or f64");
  }
  const Tensor t = file_.read(name, compute);
  const auto [index, value] =
      compute == DType::f32 ? first_invalid<float>(t, log_decay) : first_invalid<double>(t, log_decay);
  if (index >= 0) {
    fail(name, std::string(log_decay ? "log decays must be finite and ≤ 0" : "values must be finite") + ", got " +
                   std::to_string(value) + " at " + index_string(t.shape(), index));
  }
  return t.reshape(std::move(flat));
}

Tensor host_f32(const Tensor& t) {
  if (t.dtype() == DType::f32 && t.device() == Device::cpu) return t;
  const Tensor host = t.clone();
  if (host.dtype() == DType::f32) return host;
  Tensor out = Tensor::empty(t.shape(), DType::f32);
  float* dst = out.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    dst[i] = host.dtype() == DType::bf16 ? static_cast<float>(host.data<bf16>()[i])
                                         : static_cast<float>(host.data<double>()[i]);
  }
  return out;
}

Tensor to_gpu(const Tensor& t, DType dtype) {
  if (!t.defined()) return t;
  Tensor staged = t;
  if (dtype == DType::bf16) {
    staged = Tensor::empty(t.shape(), DType::bf16);
    for (int64_t i = 0; i < t.numel(); ++i) staged.data<bf16>()[i] = bf16(t.data<float>()[i]);
  }
  Tensor out = Tensor::empty(t.shape(), dtype, Device::cuda);
  out.copy_from(staged);
  return out;
}

Tensor tokens_to_batch(const Tensor& t, int64_t batch, int64_t seq_len) {
  Shape shape{batch, seq_len};
  shape.insert(shape.end(), t.shape().begin() + 1, t.shape().end());
  return host_f32(t).reshape(shape);
}

}  // namespace linea
