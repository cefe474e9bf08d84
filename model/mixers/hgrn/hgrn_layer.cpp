#include "model/mixers/hgrn/hgrn_layer.h"

#include "kernels/ops.h"
#include "model/mixers/hgrn/hgrn.h"
#include "model/mixers/hgrn/hgrn_decode_state.h"
#include "model/wide_gates.h"

namespace linea {

HgrnLayer::HgrnLayer(ParameterSet& params, const std::string& name, int64_t d_model, const HgrnConfig& config,
                     double norm_eps, const TensorParallel& tp, const LayerPlace& place)
    : channels_(tp.split_evenly(config.width, "model.hgrn width (expand_ratio · d_model)")),
      i_proj_(params, name + ".i_proj", d_model, config.width, false, ParamRole::matrix, LinearSplit::outputs,
              channels_),
      f_proj_(params, name + ".f_proj", d_model, config.width, false, ParamRole::matrix, LinearSplit::outputs,
              channels_),
      g_proj_(params, name + ".g_proj", d_model, config.width, false, ParamRole::matrix, LinearSplit::outputs,
              channels_),
      output_(params, name + ".g_norm", name + ".o_proj", config.width, d_model, channels_, ops::GateActivation::silu,
              norm_eps, tp) {
  if (config.lower_bound) lower_bound_.emplace(params, config.mixer, place, config.width, channels_);
}

void HgrnLayer::init(Rng& rng, double std) {
  i_proj_.init(rng, std);
  f_proj_.init(rng, std);
  g_proj_.init(rng, std);
  output_.init(rng, std);
  if (lower_bound_) lower_bound_->init();
}

HgrnLayer::Recurrence HgrnLayer::recurrence(StepContext& ctx) const {
  Recurrence r;
  if (lower_bound_ && lower_bound_->active()) r.lower_bound = lower_bound_->forward(ctx);
  r.f = widened(ctx, f_);
  r.i = widened(ctx, i_);
  r.g = ctx.scratch.alloc(f_.shape(), ctx.statistics_dtype());
  ops::log_forget_gate_forward(r.g, r.f, r.lower_bound, 1.0);
  Tensor u = ctx.scratch.alloc(i_.shape(), ctx.statistics_dtype());
  ops::forget_input_forward(u, r.i, r.g);
  r.u = narrowed(ctx, u);
  return r;
}

Tensor HgrnLayer::run(StepContext& ctx, const Tensor& x, HgrnDecodeState* state) {
  i_ = i_proj_.forward(ctx, x);
  f_ = f_proj_.forward(ctx, x);
  z_ = g_proj_.forward(ctx, x);
  const Recurrence r = recurrence(ctx);
  h_ = ctx.activation(i_.shape());
  if (state) {
    state->advance(ctx, {r.u, r.g, Tensor()}, h_);
  } else {
    ops::hgrn_forward(ops::HgrnImpl::chunked, ctx.seqs, {r.u, r.g, Tensor()}, h_, Tensor());
  }
  return output_.forward(ctx, h_, z_);
}

void HgrnLayer::backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) {
  const Shape shape = h_.shape();
  const auto [dh, dz] = output_.backward(ctx, h_, z_, dy);

  // h = hgrn(u, g); u = silu(i) ⊙ (1 − e^g); g = forget gate(f, lb)
  // (the gate's side in g's dtype, f32 in a bf16 step; di and df rounded back to the step's)
  const Recurrence r = recurrence(ctx);
  const DType wide = r.g.dtype();
  Tensor du = ctx.temporary(shape), dg = ctx.scratch.alloc(shape, wide);
  ops::HgrnGrads grads{du, dg, Tensor()};
  ops::hgrn_backward(ops::HgrnImpl::chunked, ctx.seqs, {r.u, r.g, Tensor()}, dh, Tensor(), grads);
  Tensor di = ctx.scratch.alloc(shape, wide), dg_input = ctx.scratch.alloc(shape, wide);
  ops::forget_input_backward(di, dg_input, widened(ctx, du), r.i, r.g);
  ops::add_inplace(dg, dg_input);
  Tensor df = ctx.scratch.alloc(shape, wide);
  Tensor dlb = r.lower_bound.defined() ? ctx.scratch.alloc(r.lower_bound.shape(), wide) : Tensor();
  if (dlb.defined()) dlb.zero();
  ops::log_forget_gate_backward(df, dlb, dg, r.f, r.lower_bound, 1.0);
  if (dlb.defined()) lower_bound_->backward(ctx, dlb);

  i_proj_.backward(x, narrowed(ctx, di), dx, false);
  f_proj_.backward(x, narrowed(ctx, df), dx, true);
  g_proj_.backward(x, dz, dx, true);
}

}  // namespace linea
