#include "worker/muon.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/newton_schulz.h"
#include "kernels/optimizer_math.h"

namespace linea {

bool takes_muon(const Parameter& p) { return p.role == ParamRole::matrix; }

void muon_apply(const Tensor& theta, const Tensor& o, double lr, double decay_factor, int64_t rows, int64_t cols) {
  const double scale = lr * 0.2 * std::sqrt(static_cast<double>(std::max(rows, cols)));
  ops::decay_and_subtract(theta, o, decay_factor, scale);
}

Tensor MuonScratch::input(int64_t rows, int64_t cols, DType dtype, Device device) {
  const int64_t n = rows * cols;
  if (input_.numel() < n || input_.dtype() != dtype || input_.device() != device) {
    input_ = Tensor::empty({n}, dtype, device);
  }
  return input_.slice(0, n).reshape({rows, cols});
}

void MuonScratch::orthogonalise(const Tensor& u, int steps) {
  const int64_t ws = ops::newton_schulz_workspace_numel(u.dim(0), u.dim(1));
  const DType precision = u.device() == Device::cuda ? gpu_precision_ : u.dtype();
  if (workspace_.numel() < ws || workspace_.dtype() != precision || workspace_.device() != u.device()) {
    workspace_ = Tensor::empty({ws}, precision, u.device());
  }
  ops::newton_schulz(u, u, steps, workspace_);
}

Muon::Muon(const OptimizerConfig& config)
    : config_(config),
      momentum_("muon.momentum", takes_muon),
      adamw_(config, [](const Parameter& p) { return !takes_muon(p); }) {
  validate(config);
}

void Muon::check_matrices(const ParameterSet& params) const {
  for (const Parameter& p : params.params()) {
    if (takes_muon(p) && p.shape.size() != 2) {
      throw std::invalid_argument("Muon: parameter '" + p.name + "' has role matrix but shape " +
                                  shape_string(p.shape) + "; expected 2-D");
    }
  }
}

void Muon::update_matrix(Parameter& p, const Tensor& momentum, double lr) {
  const int64_t rows = p.shape[0], cols = p.shape[1];
  const Tensor u = scratch_.input(rows, cols, p.value.dtype(), p.value.device());
  ops::nesterov_momentum(momentum, u, p.grad, config_.muon_momentum);
  scratch_.orthogonalise(u, config_.ns_steps);
  const double decay_factor = takes_weight_decay(p, config_) ? 1 - lr * config_.weight_decay : 1.0;
  muon_apply(p.value, u, lr, decay_factor, rows, cols);
}

void Muon::step(ParameterSet& params, double lr) {
  check_learning_rate(lr);
  check_matrices(params);
  for (ParamBuffers* b : {&momentum_, &adamw_.m(), &adamw_.v()}) b->bind(params);
  auto& ps = params.params();
  for (size_t i = 0; i < ps.size(); ++i) {
    if (takes_muon(ps[i])) update_matrix(ps[i], momentum_.at(i), lr);
  }
  adamw_.apply(params, lr, step_ + 1);
  ++step_;
}

OptimizerState Muon::export_state() const {
  OptimizerState state{std::string(optimizer_kind_name(kind())), step_, {}};
  momentum_.export_to(state.tensors);
  adamw_.m().export_to(state.tensors);
  adamw_.v().export_to(state.tensors);
  return state;
}

void Muon::import_state(const OptimizerState& state, const ParameterSet& params) {
  check_matrices(params);
  step_ = import_param_buffers(state, kind(), params, {&momentum_, &adamw_.m(), &adamw_.v()});
}

}  // namespace linea
