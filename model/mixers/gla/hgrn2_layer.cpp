#include "model/mixers/gla/hgrn2_layer.h"

#include "kernels/ops.h"
#include "model/head_projection.h"
#include "model/mixers/gla/gla_decode_state.h"
#include "model/mixers/gla/presets.h"
#include "model/wide_gates.h"

namespace linea {

Hgrn2Layer::Hgrn2Layer(ParameterSet& params, const std::string& name, int64_t d_model, const Hgrn2Config& c,
                       double norm_eps, const TensorParallel& tp, const LayerPlace& place)
    : d_k_(c.expand_ratio),
      d_v_(c.d_v),
      recompute_(c.recompute),
      spec_(ops::gla_mixer_spec(ops::GlaMixer::hgrn2, c.expand_ratio)),
      shard_(tp.shard_heads(c.heads, "model.hgrn2 heads (d_model / expand_ratio)")),
      heads_(shard_.size()),
      key_width_(heads_ * d_k_),
      value_width_(heads_ * d_v_),
      q_proj_(into_heads(params, name + ".q_proj", d_model, c.heads, d_k_, shard_)),
      f_proj_(into_heads(params, name + ".f_proj", d_model, c.heads, d_k_, shard_)),
      i_proj_(into_heads(params, name + ".i_proj", d_model, c.heads, d_v_, shard_)),
      output_(params, name + ".g_norm", name + ".o_proj", c.heads * d_v_, d_model, shard_.channels(d_v_),
              ops::GateActivation::none, norm_eps, tp) {
  if (c.lower_bound) lower_bound_.emplace(params, c.mixer, place, c.heads * d_k_, shard_.channels(d_k_));
}

void Hgrn2Layer::init(Rng& rng, double std) {
  q_proj_.init(rng, std);
  f_proj_.init(rng, std);
  i_proj_.init(rng, std);
  output_.init(rng, std);
  if (lower_bound_) lower_bound_->init();
}

Hgrn2Layer::Operands Hgrn2Layer::operands(StepContext& ctx) const {
  const int64_t n = q_.dim(0);
  Operands op;
  Tensor q = ctx.temporary({n, key_width_}), g = ctx.scratch.alloc({n, key_width_}, ctx.statistics_dtype());
  ops::activation_forward(q, q_, ops::Activation::silu);
  if (lower_bound_ && lower_bound_->active()) op.lower_bound = lower_bound_->forward(ctx);
  op.f = widened(ctx, f_);
  ops::log_forget_gate_forward(g, op.f, op.lower_bound, 1.0);
  op.in.q = q.reshape({n, heads_, d_k_});
  op.in.g = g.reshape({n, heads_, d_k_});
  op.in.v = i_.reshape({n, heads_, d_v_});
  return op;
}

Tensor Hgrn2Layer::run(StepContext& ctx, const Tensor& x, GlaDecodeState* state) {
  const int64_t n = x.dim(0);
  q_ = q_proj_.forward(ctx, x);
  f_ = f_proj_.forward(ctx, x);
  i_ = i_proj_.forward(ctx, x);
  o_ = ctx.activation({n, value_width_});
  saved_ = gla_forward_continuing(ctx, spec_, operands(ctx).in, o_.reshape({n, heads_, d_v_}), state, recompute_);
  return output_.forward(ctx, o_, Tensor());
}

void Hgrn2Layer::backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) {
  const int64_t n = dy.dim(0);
  const Tensor d_o = output_.backward(ctx, o_, Tensor(), dy).dx;

  const Operands op = operands(ctx);
  ops::GlaGrads grads;
  grads.dq = ctx.temporary({n, heads_, d_k_});
  grads.dv = ctx.temporary({n, heads_, d_v_});
  grads.dg = ctx.scratch.alloc({n, heads_, d_k_}, op.in.g.dtype());
  ops::gla_backward(ops::GlaImpl::chunked, spec_, ctx.seqs, op.in, d_o.reshape({n, heads_, d_v_}), Tensor(), grads,
                    saved_);

  Tensor dq = ctx.temporary({n, key_width_}), df = ctx.scratch.alloc({n, key_width_}, op.f.dtype());
  ops::activation_backward(dq, grads.dq.reshape({n, key_width_}), q_, ops::Activation::silu);
  Tensor dlb = op.lower_bound.defined() ? ctx.scratch.alloc(op.lower_bound.shape(), op.f.dtype()) : Tensor();
  if (dlb.defined()) dlb.zero();
  ops::log_forget_gate_backward(df, dlb, grads.dg.reshape({n, key_width_}), op.f, op.lower_bound, 1.0);
  if (dlb.defined()) lower_bound_->backward(ctx, dlb);
  q_proj_.backward(x, dq, dx, false);
  f_proj_.backward(x, narrowed(ctx, df), dx, true);
  i_proj_.backward(x, grads.dv.reshape({n, value_width_}), dx, true);
}

}  // namespace linea
