#include "worker/adamw.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/optimizer_math.h"

namespace linea {
bool takes_weight_decay(const Parameter& p, const OptimizerConfig& config) {
  return p.weight_decay && (p.role != ParamRole::embedding || config.decay_embeddings);
}

AdamWCoefficients adamw_coefficients(const OptimizerConfig& config, double lr, int64_t t, bool weight_decay) {
  AdamWCoefficients c;
  c.decay_factor = weight_decay ? 1 - lr * config.weight_decay : 1.0;
  c.beta1 = config.beta1;
  c.beta2 = config.beta2;
  c.step_size = lr / (1 - std::pow(config.beta1, static_cast<double>(t)));
  c.bias_correction2_sqrt = std::sqrt(1 - std::pow(config.beta2, static_cast<double>(t)));
  c.eps = config.eps;
  return c;
}

AdamWRule::AdamWRule(const OptimizerConfig& config, ParamSelector selected)
    : config_(config), selected_(selected), m_("adamw.m", selected), v_("adamw.v", selected) {}

void AdamWRule::apply(ParameterSet& params, double lr, int64_t t) {
  m_.bind(params);
  v_.bind(params);
  auto& ps = params.params();
  for (size_t i = 0; i < ps.size(); ++i) {
    Parameter& p = ps[i];
    if (!selected_(p)) continue;
    ops::adamw_update(p.value, p.grad, m_.at(i), v_.at(i),
                      adamw_coefficients(config_, lr, t, takes_weight_decay(p, config_)));
  }
}

AdamW::AdamW(const OptimizerConfig& config) : rule_(config, [](const Parameter&) { return true; }) { validate(config); }

void AdamW::step(ParameterSet& params, double lr) {
  check_learning_rate(lr);
  rule_.apply(params, lr, step_ + 1);
  ++step_;
}

OptimizerState AdamW::export_state() const {
  OptimizerState state{std::string(optimizer_kind_name(kind())), step_, {}};
  rule_.m().export_to(state.tensors);
  rule_.v().export_to(state.tensors);
  return state;
}

void AdamW::import_state(const OptimizerState& state, const ParameterSet& params) {
  step_ = import_param_buffers(state, kind(), params, {&rule_.m(), &rule_.v()});
}

}  // namespace linea
