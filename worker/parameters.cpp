#include "worker/parameters.h"

#include <stdexcept>

namespace linea {

std::string_view param_role_name(ParamRole role) {
  switch (role) {
    case ParamRole::matrix: return "matrix";
    case ParamRole::embedding: return "embedding";
    case ParamRole::head: return "head";
    case ParamRole::vector: return "vector";
    case ParamRole::gate: return "gate";
    case ParamRole::conv: return "conv";
  }
  return "?";
}

Parameter* ParameterSet::declare(std::string name, Shape full_shape, ParamRole role, bool weight_decay, int shard_dim,
                                 ShardRange shard) {
  if (finalized_) throw std::logic_error("ParameterSet::declare after finalize: " + name);
  if (find(name)) throw std::invalid_argument("duplicate parameter name: " + name);
  Shape shape = full_shape;
  if (shard_dim >= 0) {
    if (shard_dim >= static_cast<int>(full_shape.size()) || shard.begin < 0 || shard.size < 1 ||
        shard.end() > full_shape[static_cast<size_t>(shard_dim)]) {
      throw std::invalid_argument("ParameterSet::declare: " + name + ": shard [" + std::to_string(shard.begin) + ", " +
                                  std::to_string(shard.end()) + ") of dimension " + std::to_string(shard_dim) +
                                  " does not lie inside " + shape_string(full_shape));
    }
    if (shard.size == full_shape[static_cast<size_t>(shard_dim)]) shard_dim = -1;  // the whole tensor
    if (shard_dim >= 0) shape[static_cast<size_t>(shard_dim)] = shard.size;
  } else if (shard_dim != -1) {
    throw std::invalid_argument("ParameterSet::declare: " + name + ": shard dimension must be -1 or >= 0, got " +
                                std::to_string(shard_dim));
  }
  Parameter& p = params_.emplace_back();
  p.name = std::move(name);
  p.shape = std::move(shape);
  p.full_shape = std::move(full_shape);
  p.shard_dim = shard_dim;
  p.shard_offset = shard_dim >= 0 ? shard.begin : 0;
  p.role = role;
  p.weight_decay = weight_decay;
  p.offset = numel_;
  numel_ += shape_numel(p.shape);
  return &p;
}

void ParameterSet::finalize() {
  if (finalized_) return;
  values_ = Tensor::zeros({numel_}, dtype_, device_);
  grads_ = Tensor::zeros({numel_}, dtype_, device_);
  const size_t elem = dtype_size(dtype_);
  for (Parameter& p : params_) {
    p.value = Tensor::view(static_cast<char*>(values_.raw()) + p.offset * elem, p.shape, dtype_, device_);
    p.grad = Tensor::view(static_cast<char*>(grads_.raw()) + p.offset * elem, p.shape, dtype_, device_);
  }
  finalized_ = true;
}

Parameter* ParameterSet::find(std::string_view name) {
  for (Parameter& p : params_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const Parameter* ParameterSet::find(std::string_view name) const { return const_cast<ParameterSet*>(this)->find(name); }

}  // namespace linea
