// Linear: y = x · Wᵀ (+ b), W: [out, in], on rows of tokens x: [N, in] → y: [N, out].
// forward saves x (a view, not a copy); backward writes dx (or adds to it, when several
// projections read the same input) and accumulates dW, db.
#pragma once
#include <string>

#include "kernels/random.h"
#include "worker/parameters.h"
#include "worker/step_context.h"

namespace linea {

class Linear {
 public:
  Linear(ParameterSet& params, const std::string& name, int64_t in, int64_t out, bool bias,
         ParamRole role = ParamRole::matrix);

  // W ~ N(0, std), b = 0.
  void init(Rng& rng, double std);
  Tensor forward(StepContext& ctx, const Tensor& x);
  // dx may be undefined (the input needs no gradient).
  void backward(const Tensor& dy, Tensor dx, bool accumulate_dx);

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

 private:
  int64_t in_, out_;
  Parameter* weight_;
  Parameter* bias_ = nullptr;
  Tensor x_;
};

}  // namespace linea
