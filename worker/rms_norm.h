// RMSNorm over the feature dimension: y = x / sqrt(mean(x²) + eps) · w, w: [D] (initialised to 1).
// forward saves x and the per-row rstd; backward overwrites dx and accumulates dw.
#pragma once
#include <string>

#include "worker/parameters.h"
#include "worker/step_context.h"

namespace linea {

class RMSNorm {
 public:
  RMSNorm(ParameterSet& params, const std::string& name, int64_t dim, double eps);

  void init();
  Tensor forward(StepContext& ctx, const Tensor& x);
  void backward(const Tensor& dy, Tensor dx);

 private:
  int64_t dim_;
  double eps_;
  Parameter* weight_;
  Tensor x_, rstd_;
};

}  // namespace linea
