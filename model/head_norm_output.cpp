#include "model/head_norm_output.h"

#include "model/head_projection.h"

namespace linea {

HeadNormOutput::HeadNormOutput(ParameterSet& params, const std::string& norm_name, const std::string& proj_name,
                               int64_t heads, int64_t d_v, int64_t d_model, const HeadShard& shard,
                               ops::GateActivation act, double eps)
    : heads_(shard.size()),
      act_(act),
      eps_(eps),
      norm_(params.declare(norm_name + ".weight", {d_v}, ParamRole::vector, false)),
      proj_(out_of_heads(params, proj_name, heads, d_v, d_model, shard)) {
  norm_->partial_grad = heads_ < heads;
}

void HeadNormOutput::init(Rng& rng, double std) {
  fill_constant(norm_->value, 1.0);
  proj_.init(rng, std);
}

Tensor HeadNormOutput::forward(StepContext& ctx, const Tensor& o, const Tensor& z) {
  Tensor y = ctx.temporary(o.shape());
  Tensor rstd = ctx.scratch.alloc({o.dim(0), heads_}, ctx.statistics_dtype());
  ops::gated_rmsnorm_forward(y, rstd, o, z, norm_->compute, heads_, act_, eps_);
  return proj_.forward(ctx, y);
}

HeadNormOutput::Grads HeadNormOutput::backward(StepContext& ctx, const Tensor& o, const Tensor& z, const Tensor& dy) {
  // ∂L/∂y = dy · W_o first; the norm's backward then recomputes its forward in the same pass (rstd,
  // and y for o_proj's weight gradient).
  Tensor dnormed = ctx.temporary(o.shape());
  proj_.backward_input(dy, dnormed, false);
  Tensor y = ctx.temporary(o.shape());
  Grads g{ctx.temporary(o.shape()), z.defined() ? ctx.temporary(z.shape()) : Tensor()};
  ops::gated_rmsnorm_backward_recompute(g.d_o, g.dz, norm_->compute_grad, y, dnormed, o, z, norm_->compute, heads_,
                                        act_, eps_);
  proj_.backward_parameters(y, dy);
  return g;
}

}  // namespace linea
