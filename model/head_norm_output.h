// HeadNormOutput: the output of a mixer of H heads of value width V (the delta rule, GLA, RetNet),
// from the mixer's o (and the output gate's input z):
//
//   y = RMSNorm_per_head(o) · γ ⊙ act(z),   out = W_o y      (γ: [V], shared by the heads; H·V → D)
//
// Its parameters are NORM.weight (γ: vector role, no weight decay; NORM names the layer's norm, as
// fla's o_norm or g_norm) and o_proj. Under tensor parallelism a rank holds the heads `shard`: the
// columns of o_proj out of them (row-parallel, so out is this rank's term of a sum over the group);
// γ is whole on every rank, with a partial gradient when the rank holds only some of the heads.
// Saves nothing: backward recomputes y (o_proj's weight gradient reads it) and the norm's rstd.
#pragma once
#include <string>

#include "kernels/ops.h"
#include "kernels/random.h"
#include "model/linear.h"
#include "model/parameters.h"
#include "model/step_context.h"
#include "model/tensor_parallel.h"

namespace linea {

class HeadNormOutput {
 public:
  // heads, d_v: the layer's full head count and value width; act: none (no gate), silu or sigmoid.
  HeadNormOutput(ParameterSet& params, const std::string& norm_name, const std::string& proj_name, int64_t heads,
                 int64_t d_v, int64_t d_model, const HeadShard& shard, ops::GateActivation act, double eps);

  void init(Rng& rng, double std);  // γ = 1, W_o ~ N(0, std)
  // o, z: [N, local heads · V] (z undefined without a gate); out in ctx.activations.
  Tensor forward(StepContext& ctx, const Tensor& o, const Tensor& z);
  // ∂L/∂o and ∂L/∂z (undefined without a gate) from ∂L/∂out = dy, temporaries in ctx.scratch.
  struct Grads {
    Tensor d_o, dz;
  };
  Grads backward(StepContext& ctx, const Tensor& o, const Tensor& z, const Tensor& dy);

  // The dtype the layer computes in (of γ's compute copy).
  DType compute_dtype() const { return norm_->compute.dtype(); }

 private:
  int64_t heads_;  // of this rank
  ops::GateActivation act_;
  double eps_;
  Parameter* norm_;
  Linear proj_;
};

}  // namespace linea
