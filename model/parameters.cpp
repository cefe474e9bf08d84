#include "model/parameters.h"

#include <stdexcept>

#include "kernels/ops.h"

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

ParameterSet::ParameterSet(DType dtype, Device device, std::optional<DType> compute_dtype)
    : dtype_(dtype), device_(device), compute_dtype_(compute_dtype.value_or(dtype)) {
  if (compute_dtype_ != dtype_ && (compute_dtype_ != DType::bf16 || device_ != Device::cuda)) {
    throw std::invalid_argument("ParameterSet: compute weights in " + std::string(dtype_name(compute_dtype_)) +
                                " beside " + std::string(dtype_name(dtype_)) + " masters on " +
                                std::string(device_name(device_)) + ": only bf16 on cuda differs from the masters");
  }
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
  if (mixed_precision()) {
    compute_values_ = Tensor::zeros({numel_}, compute_dtype_, device_);
    compute_grads_ = Tensor::zeros({numel_}, compute_dtype_, device_);
  }
  bind_views(values_, grads_);
  finalized_ = true;
}

void ParameterSet::bind_views(const Tensor& values, const Tensor& grads) {
  const auto view = [](const Tensor& flat, const Parameter& p) {
    return Tensor::view(static_cast<char*>(flat.raw()) + p.offset * dtype_size(flat.dtype()), p.shape, flat.dtype(),
                        flat.device());
  };
  for (Parameter& p : params_) {
    p.value = view(values, p);
    p.grad = view(grads, p);
    p.compute = mixed_precision() ? view(compute_values_, p) : p.value;
    p.compute_grad = mixed_precision() ? view(compute_grads_, p) : p.grad;
  }
}

void ParameterSet::zero_grads() {
  grads_.zero();
  if (mixed_precision()) compute_grads_.zero();
}

void ParameterSet::refresh_compute_values() {
  if (mixed_precision()) ops::convert(compute_values_, values_);
}

void ParameterSet::accumulate_compute_grads(size_t first, size_t end) {
  if (!mixed_precision() || first >= end) return;
  const Parameter& last = params_.at(end - 1);
  const int64_t begin = params_.at(first).offset, stop = last.offset + shape_numel(last.shape);
  ops::add_converted(grads_.slice(begin, stop), compute_grads_.slice(begin, stop));
  compute_grads_.slice(begin, stop).zero();
}

void ParameterSet::with_host_values(const std::function<void()>& fn) {
  if (!finalized_) throw std::logic_error("ParameterSet::with_host_values before finalize");
  if (device_ == Device::cpu) return fn();
  Tensor host_values = values_.clone();
  bind_views(host_values, grads_);
  try {
    fn();
  } catch (...) {
    bind_views(values_, grads_);
    throw;
  }
  bind_views(values_, grads_);
  values_.copy_from(host_values);
  refresh_compute_values();
}

Parameter* ParameterSet::find(std::string_view name) {
  for (Parameter& p : params_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const Parameter* ParameterSet::find(std::string_view name) const { return const_cast<ParameterSet*>(this)->find(name); }

}  // namespace linea
