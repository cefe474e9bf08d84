#include "worker/param_buffers.h"

#include <stdexcept>

namespace linea {
namespace {

void check_master_weights(const ParameterSet& params) {
  if (!params.finalized()) throw std::invalid_argument("optimizer: the ParameterSet is not finalized");
  if (params.dtype() != DType::f32 && params.dtype() != DType::f64) {
    throw std::invalid_argument("optimizer: master weights must be f32 or f64, got " +
                                std::string(dtype_name(params.dtype())));
  }
  if (params.values().device() == Device::cuda && params.dtype() != DType::f32) {
    throw std::invalid_argument("optimizer: master weights on a GPU must be f32, got " + params.values().describe());
  }
}

}  // namespace

ParamBuffers::ParamBuffers(std::string prefix, ParamSelector selected)
    : prefix_(std::move(prefix)), selected_(std::move(selected)) {}

void ParamBuffers::bind(const ParameterSet& params) {
  check_master_weights(params);
  if (bound_) {
    bool same =
        params.dtype() == dtype_ && params.values().device() == device_ && params.params().size() == names_.size();
    for (size_t i = 0; same && i < names_.size(); ++i) {
      same = params.params()[i].name == names_[i] && params.params()[i].shape == shapes_[i];
    }
    if (!same) {
      throw std::invalid_argument("optimizer (" + prefix_ +
                                  "): the ParameterSet differs from the one this optimizer was bound to (names, "
                                  "shapes, dtype or device)");
    }
    return;
  }
  dtype_ = params.dtype();
  device_ = params.values().device();
  for (const Parameter& p : params.params()) {
    names_.push_back(p.name);
    shapes_.push_back(p.shape);
    buffers_.push_back(selected_(p) ? Tensor::zeros(p.shape, dtype_, device_) : Tensor());
  }
  bound_ = true;
}

void ParamBuffers::clear() {
  bound_ = false;
  names_.clear();
  shapes_.clear();
  buffers_.clear();
}

void ParamBuffers::export_to(std::map<std::string, Tensor>& tensors) const {
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (buffers_[i].defined()) tensors[prefix_ + "/" + names_[i]] = buffers_[i].clone();
  }
}

void ParamBuffers::check_importable(const std::map<std::string, Tensor>& tensors, const ParameterSet& params) const {
  for (const Parameter& p : params.params()) {
    if (!selected_(p)) continue;
    const std::string name = buffer_name(p);
    auto it = tensors.find(name);
    if (it == tensors.end()) throw std::invalid_argument("optimizer state: missing tensor '" + name + "'");
    const Tensor& t = it->second;
    if (t.shape() != p.shape || t.dtype() != params.dtype() || t.device() != Device::cpu || !t.raw()) {
      throw std::invalid_argument("optimizer state: tensor '" + name + "' is " + t.describe() + ", expected " +
                                  std::string(dtype_name(params.dtype())) + shape_string(p.shape) + " cpu");
    }
  }
}

bool ParamBuffers::expects(const std::string& name, const ParameterSet& params) const {
  if (name.size() <= prefix_.size() + 1 || name.compare(0, prefix_.size(), prefix_) != 0 ||
      name[prefix_.size()] != '/') {
    return false;
  }
  const Parameter* p = params.find(std::string_view(name).substr(prefix_.size() + 1));
  return p != nullptr && selected_(*p);
}

void ParamBuffers::import_from(const std::map<std::string, Tensor>& tensors, const ParameterSet& params) {
  clear();
  bind(params);
  const auto& ps = params.params();
  for (size_t i = 0; i < ps.size(); ++i) {
    if (buffers_[i].defined()) buffers_[i].copy_from(tensors.at(buffer_name(ps[i])));
  }
}

int64_t import_param_buffers(const OptimizerState& state, OptimizerKind kind, const ParameterSet& params,
                             std::initializer_list<ParamBuffers*> buffers) {
  if (state.kind != optimizer_kind_name(kind)) {
    throw std::invalid_argument("optimizer state: written by optimizer '" + state.kind + "', this run uses '" +
                                std::string(optimizer_kind_name(kind)) + "'");
  }
  if (state.step < 0) {
    throw std::invalid_argument("optimizer state: step must be >= 0, got " + std::to_string(state.step));
  }
  check_master_weights(params);
  if (state.tensors.empty() && state.step == 0) {  // saved before the first step: start from zeros
    for (ParamBuffers* b : buffers) {
      b->clear();
      b->bind(params);
    }
    return 0;
  }
  for (ParamBuffers* b : buffers) b->check_importable(state.tensors, params);
  for (const auto& [name, tensor] : state.tensors) {
    bool known = false;
    for (ParamBuffers* b : buffers) known = known || b->expects(name, params);
    if (!known) throw std::invalid_argument("optimizer state: unexpected tensor '" + name + "'");
  }
  for (ParamBuffers* b : buffers) b->import_from(state.tensors, params);
  return state.step;
}

}  // namespace linea
