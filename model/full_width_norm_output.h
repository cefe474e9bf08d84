// FullWidthNormOutput: the output of a mixer that normalises over all its W channels (HGRN,
// HGRN-2, Mamba-2), from the mixer's x (and the gate's input z):
//
//   y = RMSNorm_W(x) · γ ⊙ act(z),   out = W_o y      (model/full_width_rms_norm.h; W → D)
//
// Its parameters are NORM.weight (γ: [W]) and PROJ (W_o). Under tensor parallelism a rank holds the
// channels `columns` of W: of x, z, and the columns of W_o (row-parallel, so out is this rank's term
// of a sum over the group). Saves nothing: backward recomputes y (W_o's weight gradient reads it).
#pragma once
#include <string>

#include "kernels/ops.h"
#include "kernels/random.h"
#include "model/full_width_rms_norm.h"
#include "model/linear.h"
#include "model/parameters.h"
#include "model/step_context.h"
#include "model/tensor_parallel.h"

namespace linea {

class FullWidthNormOutput {
 public:
  // act: none (z ignored), silu or sigmoid.
  FullWidthNormOutput(ParameterSet& params, const std::string& norm_name, const std::string& proj_name, int64_t width,
                      int64_t d_model, ShardRange columns, ops::GateActivation act, double eps,
                      const TensorParallel& tp);

  void init(Rng& rng, double std);  // γ = 1, W_o ~ N(0, std)
  // x, z: [N, columns.size]; out in ctx.activations.
  Tensor forward(StepContext& ctx, const Tensor& x, const Tensor& z);
  // ∂L/∂x and ∂L/∂z (undefined without a gate) from ∂L/∂out = dy, temporaries in ctx.scratch.
  struct Grads {
    Tensor dx, dz;
  };
  Grads backward(StepContext& ctx, const Tensor& x, const Tensor& z, const Tensor& dy);

  // The dtype the layer computes in (of W_o's compute copy).
  DType compute_dtype() const { return proj_.weight().compute.dtype(); }

 private:
  bool gated_;
  FullWidthRMSNorm norm_;
  Linear proj_;
};

}  // namespace linea
