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

Parameter* ParameterSet::declare(std::string name, Shape shape, ParamRole role, bool weight_decay) {
  if (finalized_) throw std::logic_error("ParameterSet::declare after finalize: " + name);
  if (find(name)) throw std::invalid_argument("duplicate parameter name: " + name);
  Parameter& p = params_.emplace_back();
  p.name = std::move(name);
  p.shape = std::move(shape);
  p.role = role;
  p.weight_decay = weight_decay;
  p.offset = numel_;
  numel_ += shape_numel(p.shape);
  return &p;
}

void ParameterSet::finalize() {
  if (finalized_) return;
  values_ = Tensor::zeros({numel_}, dtype_);
  grads_ = Tensor::zeros({numel_}, dtype_);
  const size_t elem = dtype_size(dtype_);
  for (Parameter& p : params_) {
    p.value = Tensor::view(static_cast<char*>(values_.raw()) + p.offset * elem, p.shape, dtype_);
    p.grad = Tensor::view(static_cast<char*>(grads_.raw()) + p.offset * elem, p.shape, dtype_);
  }
  finalized_ = true;
}

Parameter* ParameterSet::find(std::string_view name) {
  for (Parameter& p : params_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const Parameter* ParameterSet::find(std::string_view name) const {
  return const_cast<ParameterSet*>(this)->find(name);
}

}  // namespace linea
