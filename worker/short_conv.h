// ShortConv: depthwise causal convolution over time (kernel W, no bias) followed by SiLU, on
// x: [N, C], weight: [C, W] ~ N(0, init_std) (fla's ShortConvolution). It restarts at every
// document boundary of ctx.seqs. backward overwrites dx and accumulates dweight.
#pragma once
#include <string>

#include "kernels/random.h"
#include "worker/parameters.h"
#include "worker/step_context.h"

namespace linea {

class ShortConv {
 public:
  ShortConv(ParameterSet& params, const std::string& name, int64_t channels, int64_t kernel);

  void init(Rng& rng, double std);
  Tensor forward(StepContext& ctx, const Tensor& x);
  void backward(StepContext& ctx, const Tensor& dy, Tensor dx);

 private:
  int64_t channels_;
  Parameter* weight_;
  Tensor x_;
};

}  // namespace linea
