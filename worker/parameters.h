// ParameterSet: every trainable tensor of a model, in one flat fp32 buffer (and one for gradients).
//
// Modules declare their parameters (name, shape, role) while the model is built; finalize() then
// allocates the two flat buffers and makes each Parameter's value/grad a view into them, so the
// optimizer, gradient clipping, data-parallel reduction and checkpoints can treat all parameters
// as one array. Addresses of Parameter objects are stable (modules keep Parameter*).
//
// Under tensor parallelism (worker/tensor_parallel.h) a parameter may be split over the TP ranks
// along one dimension: `shape` is then this rank's shard, `full_shape` the logical tensor (as at
// TP = 1, under the same name) and [shard_offset, shard_offset + shape[shard_dim]) the indices of
// shard_dim this rank holds. The flat buffers hold shards; a replicated parameter is whole on every
// rank (shard_dim = −1, shape = full_shape).
#pragma once
#include <deque>
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
  int64_t offset = 0;  // element offset in the flat buffers
  Tensor value;        // view into ParameterSet::values()
  Tensor grad;         // view into ParameterSet::grads()
};

class ParameterSet {
 public:
  // The flat buffers live on `device`.
  explicit ParameterSet(DType dtype = DType::f32, Device device = Device::cpu) : dtype_(dtype), device_(device) {}
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
  Device device() const { return device_; }
  int64_t numel() const { return numel_; }
  Tensor values() const { return values_; }  // [numel]
  Tensor grads() const { return grads_; }    // [numel]
  void zero_grads() { grads_.zero(); }

  std::deque<Parameter>& params() { return params_; }
  const std::deque<Parameter>& params() const { return params_; }
  // nullptr when absent
  Parameter* find(std::string_view name);
  const Parameter* find(std::string_view name) const;

 private:
  DType dtype_;
  Device device_;
  std::deque<Parameter> params_;
  int64_t numel_ = 0;
  bool finalized_ = false;
  Tensor values_, grads_;
};

}  // namespace linea
