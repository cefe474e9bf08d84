#include "worker/adamw.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "worker/float_dispatch.h"
#include "worker/update_operands.h"
#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/optimizer_math.h"
#endif

namespace linea {
namespace {

template <class T>
void adamw_kernel(T* theta, const T* grad, T* m, T* v, int64_t n, const AdamWCoefficients& c) {
  const T decay_factor = static_cast<T>(c.decay_factor), beta1 = static_cast<T>(c.beta1),
          beta2 = static_cast<T>(c.beta2), step_size = static_cast<T>(c.step_size),
          bc2_sqrt = static_cast<T>(c.bias_correction2_sqrt), eps = static_cast<T>(c.eps);
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const T g = grad[i];
    theta[i] *= decay_factor;
    m[i] = beta1 * m[i] + (T(1) - beta1) * g;
    v[i] = beta2 * v[i] + (T(1) - beta2) * g * g;
    theta[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps);
  }
}

}  // namespace

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

void adamw_update(const Tensor& theta, const Tensor& grad, const Tensor& m, const Tensor& v,
                  const AdamWCoefficients& c) {
  const int64_t n = theta.numel();
  if (check_update_operands("adamw_update", theta, {&grad, &m, &v}) == Device::cuda) {
#ifdef LINEA_WITH_CUDA
    return cuda::adamw_update(theta.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(), n, c);
#endif
  }
  with_float_type(theta.dtype(), "AdamW", [&](auto zero) {
    using T = decltype(zero);
    adamw_kernel<T>(theta.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>(), n, c);
  });
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
    adamw_update(p.value, p.grad, m_.at(i), v_.at(i),
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
