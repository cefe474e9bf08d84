// ParameterSet: every trainable tensor of a model, in one flat fp32 buffer (and one for gradients).
//
// Modules declare their parameters (name, shape, role) while the model is built; finalize() then
// allocates the two flat buffers and makes each Parameter's value/grad a view into them, so the
// optimizer, gradient clipping, data-parallel reduction and checkpoints can treat all parameters
// as one array. Addresses of Parameter objects are stable (modules keep Parameter*).
//
// The buffers live on the set's device. values() are the MASTER weights and grads() their
// gradients, in the set's dtype (f32 to train, f64 for finite-difference tests). With a compute
// dtype other than that (bf16 on CUDA: mixed precision) the set also keeps a compute copy of the
// weights and a compute gradient buffer in that dtype: forward and backward read Parameter::compute
// and accumulate into Parameter::compute_grad; refresh_compute_values() rounds the masters into the
// copy (after every change of values(): init, resume, optimizer step) and accumulate_compute_grads()
// adds the compute gradients into grads() and zeroes them (after each micro-batch's backward).
// Without mixed precision compute/compute_grad are value/grad themselves and both calls do nothing.
//
// Under tensor parallelism (model/tensor_parallel.h) a parameter may be split over the TP ranks
// along one dimension: `shape` is then this rank's shard, `full_shape` the logical tensor (as at
// TP = 1, under the same name) and [shard_offset, shard_offset + shape[shard_dim]) the indices of
// shard_dim this rank holds. The flat buffers hold shards; a replicated parameter is whole on every
// rank (shard_dim = −1, shape = full_shape).
#pragma once
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "kernels/tensor.h"

namespace linea {

// What a parameter is, which decides its optimizer (reference/mixers.md §6.3).
enum class ParamRole {
  matrix,     // 2-D hidden weight: Muon-eligible, weight decay
  embedding,  // token embedding table: AdamW
  head,       // LM head (untied): AdamW
  vector,     // norm gains and biases: AdamW, no weight decay
  gate,       // A_log, dt_bias, small gate projections, routing λ: AdamW, no weight decay
  conv,       // depthwise short-conv filters: AdamW, weight decay
};
std::string_view param_role_name(ParamRole role);

// Indices [begin, begin + size) of one dimension of a tensor.
struct ShardRange {
  int64_t begin = 0;
  int64_t size = 0;
  int64_t end() const { return begin + size; }
};

struct Parameter {
  std::string name;          // e.g. "layers.3.mixer.q_proj.weight"
  Shape shape;               // what this rank holds
  Shape full_shape;          // the logical tensor
  int shard_dim = -1;        // the dimension split over the TP ranks; −1: replicated
  int64_t shard_offset = 0;  // index of shard_dim where this rank's shard starts
  // Replicated, but the backward of each TP rank adds only its part of the gradient (e.g. a norm
  // weight shared by all heads, on a rank that holds some of them); Model sums these over TP.
  bool partial_grad = false;
  ParamRole role = ParamRole::matrix;
  bool weight_decay = true;
  int64_t offset = 0;   // element offset in the flat buffers
  Tensor value;         // view into ParameterSet::values() (the master weights)
  Tensor grad;          // view into ParameterSet::grads()
  Tensor compute;       // what forward and backward read: a view into compute_values(), or value
  Tensor compute_grad;  // where backward accumulates: a view into compute_grads(), or grad
};

class ParameterSet {
 public:
  // compute_dtype: that of Parameter::compute (default: dtype); bf16 needs device = cuda.
  explicit ParameterSet(DType dtype = DType::f32, Device device = Device::cpu,
                        std::optional<DType> compute_dtype = std::nullopt);
  ParameterSet(const ParameterSet&) = delete;
  ParameterSet& operator=(const ParameterSet&) = delete;

  // Names must be unique. Must be called before finalize(). A shard (shard_dim ≥ 0) holds indices
  // `shard` of dimension shard_dim of full_shape; one that covers the whole dimension is recorded as
  // replicated.
  Parameter* declare(std::string name, Shape full_shape, ParamRole role, bool weight_decay, int shard_dim = -1,
                     ShardRange shard = {});
  // Allocates the flat buffers (zero-filled) and binds every Parameter's views.
  void finalize();
  bool finalized() const { return finalized_; }

  DType dtype() const { return dtype_; }
  DType compute_dtype() const { return compute_dtype_; }
  bool mixed_precision() const { return compute_dtype_ != dtype_; }
  Device device() const { return device_; }
  int64_t numel() const { return numel_; }
  Tensor values() const { return values_; }  // [numel]
  Tensor grads() const { return grads_; }    // [numel]
  Tensor compute_values() const { return mixed_precision() ? compute_values_ : values_; }
  Tensor compute_grads() const { return mixed_precision() ? compute_grads_ : grads_; }
  void zero_grads();
  void refresh_compute_values();
  void accumulate_compute_grads() { accumulate_compute_grads(0, params_.size()); }
  // The same for the parameters params()[first, end) only (contiguous in the flat buffers).
  void accumulate_compute_grads(size_t first, size_t end);
  // Runs fn with every Parameter::value (and compute, without mixed precision) bound to a host copy
  // of values(), then copies that back to the device and refreshes the compute copy: for code that
  // writes weights through host pointers (initialisation). Gradients stay where they are. On the
  // CPU it just runs fn.
  void with_host_values(const std::function<void()>& fn);

  std::deque<Parameter>& params() { return params_; }
  const std::deque<Parameter>& params() const { return params_; }
  // nullptr when absent
  Parameter* find(std::string_view name);
  const Parameter* find(std::string_view name) const;

 private:
  // Points every Parameter's value/grad at values/grads and compute/compute_grad at the compute
  // buffers (or at value/grad without mixed precision).
  void bind_views(const Tensor& values, const Tensor& grads);

  DType dtype_;
  Device device_;
  DType compute_dtype_;
  std::deque<Parameter> params_;
  int64_t numel_ = 0;
  bool finalized_ = false;
  Tensor values_, grads_;
  Tensor compute_values_, compute_grads_;  // mixed precision only
};

}  // namespace linea
