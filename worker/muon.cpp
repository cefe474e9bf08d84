#include "worker/muon.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "worker/float_dispatch.h"
#include "worker/newton_schulz.h"

namespace linea {
namespace {

bool is_matrix(const Parameter& p) { return p.role == ParamRole::matrix; }

// B ← μ·B + g;  u = g + μ·B (the Nesterov look-ahead, written to u)
template <class T>
void nesterov_momentum(T* momentum, T* u, const T* grad, int64_t n, double mu) {
  const T mu_t = static_cast<T>(mu);
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    momentum[i] = mu_t * momentum[i] + grad[i];
    u[i] = grad[i] + mu_t * momentum[i];
  }
}

// θ ← θ·decay_factor − scale·o
template <class T>
void apply_update(T* theta, const T* o, int64_t n, double decay_factor, double scale) {
  const T decay_t = static_cast<T>(decay_factor), scale_t = static_cast<T>(scale);
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) theta[i] = theta[i] * decay_t - scale_t * o[i];
}

}  // namespace

Muon::Muon(const OptimizerConfig& config)
    : config_(config),
      momentum_("muon.momentum", is_matrix),
      adamw_(config, [](const Parameter& p) { return !is_matrix(p); }) {
  validate(config);
}

void Muon::check_matrices(const ParameterSet& params) const {
  for (const Parameter& p : params.params()) {
    if (is_matrix(p) && p.shape.size() != 2) {
      throw std::invalid_argument("Muon: parameter '" + p.name + "' has role matrix but shape " +
                                  shape_string(p.shape) + "; expected 2-D");
    }
  }
}

void Muon::update_matrix(Parameter& p, const Tensor& momentum, double lr) {
  const int64_t rows = p.shape[0], cols = p.shape[1];
  const int64_t n = rows * cols;
  const DType dtype = p.value.dtype();
  if (update_.numel() < n) update_ = Tensor::empty({n}, dtype);
  const int64_t ws = newton_schulz_workspace_numel(rows, cols);
  if (ns_workspace_.numel() < ws) ns_workspace_ = Tensor::empty({ws}, dtype);
  Tensor u = update_.slice(0, n).reshape({rows, cols});

  with_float_type(dtype, "Muon", [&](auto zero) {
    using T = decltype(zero);
    nesterov_momentum<T>(momentum.data<T>(), u.data<T>(), p.grad.data<T>(), n, config_.muon_momentum);
  });
  newton_schulz(u, u, config_.ns_steps, ns_workspace_);
  const double decay_factor = takes_weight_decay(p, config_) ? 1 - lr * config_.weight_decay : 1.0;
  const double scale = lr * 0.2 * std::sqrt(static_cast<double>(std::max(rows, cols)));
  with_float_type(dtype, "Muon", [&](auto zero) {
    using T = decltype(zero);
    apply_update<T>(p.value.data<T>(), u.data<T>(), n, decay_factor, scale);
  });
}

void Muon::step(ParameterSet& params, double lr) {
  check_learning_rate(lr);
  check_matrices(params);
  for (ParamBuffers* b : {&momentum_, &adamw_.m(), &adamw_.v()}) b->bind(params);
  auto& ps = params.params();
  for (size_t i = 0; i < ps.size(); ++i) {
    if (is_matrix(ps[i])) update_matrix(ps[i], momentum_.at(i), lr);
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
