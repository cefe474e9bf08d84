// Linear: y = x · Wᵀ (+ b), W: [out, in], on rows of tokens x: [N, in] → y: [N, out].
// Saves nothing: backward takes the forward's input x again (the caller keeps it or recomputes
// it), writes dx (or adds to it, when several projections read the same input) and accumulates
// dW, db.
//
// Under tensor parallelism a Linear may hold a part of W (Megatron's parallel linear layers):
//   LinearSplit::outputs  rows `range` of W and of b (column-parallel): x is whole, y holds those
//                         output features;
//   LinearSplit::inputs   columns `range` of W (row-parallel; no bias): x holds those input
//                         features, y is this rank's term of a sum over the ranks.
// Its parameters keep the full shape [out, in] as their logical tensor; in_features() and
// out_features() are the local widths. The sums over ranks are the caller's (Block, Model).
#pragma once
#include <string>

#include "kernels/random.h"
#include "model/parameters.h"
#include "model/step_context.h"

namespace linea {

enum class LinearSplit { none, outputs, inputs };

class Linear {
 public:
  // in, out: the full widths; range: the indices of the split dimension this rank holds.
  Linear(ParameterSet& params, const std::string& name, int64_t in, int64_t out, bool bias,
         ParamRole role = ParamRole::matrix, LinearSplit split = LinearSplit::none, ShardRange range = {});

  // W ~ N(0, std) (this rank's part of the full draw), b = 0.
  void init(Rng& rng, double std);
  // y in ctx.activations (kept for the step), or into a given y: [N, out] (e.g. a temporary).
  Tensor forward(StepContext& ctx, const Tensor& x);
  void forward(const Tensor& x, Tensor y);
  // x: the forward's input; dx may be undefined (the input needs no gradient).
  void backward(const Tensor& x, const Tensor& dy, Tensor dx, bool accumulate_dx);
  // backward in two halves, for a caller that forms x only after it has dx: the input's gradient
  // (dx written, or added to when accumulate_dx), then the parameters' (dW, db accumulated). The
  // same bits as backward (two independent products).
  void backward_input(const Tensor& dy, Tensor dx, bool accumulate_dx);
  void backward_parameters(const Tensor& x, const Tensor& dy);

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  Parameter& weight() { return *weight_; }
  const Parameter& weight() const { return *weight_; }
  // Marks the weight and bias as taking only this rank's part of their gradient (Parameter::partial_grad).
  void set_partial_grad(bool partial);

 private:
  int64_t in_, out_;
  Parameter* weight_;
  Parameter* bias_ = nullptr;
};

}  // namespace linea
