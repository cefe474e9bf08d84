#include "model/decay_gate_init.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/parameter_shard.h"

namespace linea {

namespace {
// p ← its shard of the full tensor whose element i is values[i].
void assign_values(Parameter& p, const std::vector<double>& values) {
  Tensor full = Tensor::empty(p.full_shape, p.value.dtype());
  for (size_t i = 0; i < values.size(); ++i) {
    if (full.dtype() == DType::f64) {
      full.data<double>()[i] = values[i];
    } else {
      full.data<float>()[i] = static_cast<float>(values[i]);
    }
  }
  assign_from_full(p, full);
}
}  // namespace

void init_a_log(Parameter& A_log, Rng& rng, double a_min) {
  std::vector<double> values(static_cast<size_t>(shape_numel(A_log.full_shape)));
  for (double& value : values) {
    double a = 0;
    while (a <= 0) a = a_min + (16.0 - a_min) * rng.uniform();
    value = std::log(a);
  }
  assign_values(A_log, values);
}

void init_dt_bias(Parameter& dt_bias, Rng& rng, double dt_min, double dt_max, double dt_floor) {
  std::vector<double> values(static_cast<size_t>(shape_numel(dt_bias.full_shape)));
  for (double& value : values) {
    const double dt = std::max(std::exp(std::log(dt_min) + (std::log(dt_max) - std::log(dt_min)) * rng.uniform()),
                               dt_floor);
    value = dt + std::log(-std::expm1(-dt));
  }
  assign_values(dt_bias, values);
}

}  // namespace linea
