// FullWidthRMSNorm: RMSNorm (optionally gated) over the whole width W of a tensor whose columns may
// be split over the tensor-parallel ranks (HGRN, HGRN-2 and Mamba-2 normalise over all their
// channels, not per head):
//
//   y = x · rstd · γ ⊙ act(z),   rstd = 1 / sqrt(mean over the W channels of x² + eps)
//
// with γ: [W] whole on every rank. x, z, y and the gradients are this rank's columns `columns` of
// W. Under TP the rank's columns of x (and z) are gathered into the full width first (zeros
// elsewhere, summed over the group), every rank normalises the full rows, and each keeps its own
// columns; the backward gathers dy too, so γ's gradient is the whole one, identical on every rank.
// Without TP it is ops::gated_rmsnorm_* with one head. Saves nothing: temporaries in ctx.scratch.
#pragma once
#include <string>

#include "kernels/ops.h"
#include "model/parameters.h"
#include "model/step_context.h"
#include "model/tensor_parallel.h"

namespace linea {

class FullWidthRMSNorm {
 public:
  // act: none (z ignored), silu or sigmoid.
  FullWidthRMSNorm(ParameterSet& params, const std::string& name, int64_t width, ShardRange columns,
                   ops::GateActivation act, double eps, const TensorParallel& tp);

  void init();  // γ = 1
  // y: [N, columns.size].
  void forward(StepContext& ctx, const Tensor& x, const Tensor& z, Tensor y);
  // x, z: the forward's inputs; dx, dz overwritten (dz only with a gate).
  void backward(StepContext& ctx, const Tensor& x, const Tensor& z, const Tensor& dy, Tensor dx, Tensor dz);

 private:
  // The full [N, W] rows of this rank's columns `local` (local itself without TP).
  Tensor gather(StepContext& ctx, const Tensor& local) const;
  // This rank's columns of `full` into `local` (a copy; nothing without TP, where they are one).
  void keep_columns(const Tensor& full, Tensor local) const;

  int64_t width_;
  ShardRange columns_;
  ops::GateActivation act_;
  double eps_;
  TensorParallel tp_;
  Parameter* weight_;
};

}  // namespace linea
