// LowRankLinear: y = W₂ (W₁ x) (+ b), W₁: [rank, in], W₂: [out, rank] — KDA/GDN-2's decay
// projection f_proj and output-gate projection g_proj (reference/mixers.md §1.3). The factors are
// named NAME.0 and NAME.1 (fla's nn.Sequential); the bias, if any, belongs to the second.
// Under tensor parallelism (split = outputs) W₂ and b hold rows `range` (column-parallel) and W₁
// is whole on every rank; each rank's backward then gives only its part of W₁'s gradient (through
// its rows of W₂), so W₁ is marked partial_grad (summed over the group by Model).
// forward keeps the inner W₁ x ([N, rank], small) in ctx.activations; backward takes x again.
#pragma once
#include <string>

#include "model/linear.h"

namespace linea {

class LowRankLinear {
 public:
  // split: none or outputs.
  LowRankLinear(ParameterSet& params, const std::string& name, int64_t in, int64_t rank, int64_t out, bool bias,
                LinearSplit split = LinearSplit::none, ShardRange range = {});

  void init(Rng& rng, double std);
  // y in ctx.activations, or into a given y: [N, out].
  Tensor forward(StepContext& ctx, const Tensor& x);
  void forward(StepContext& ctx, const Tensor& x, Tensor y);
  // x: the forward's input.
  void backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx, bool accumulate_dx);

 private:
  int64_t rank_;
  Linear down_, up_;
  Tensor inner_;  // W₁ x
};

}  // namespace linea
