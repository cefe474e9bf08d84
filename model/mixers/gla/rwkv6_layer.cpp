#include "model/mixers/gla/rwkv6_layer.h"

#include "kernels/ops.h"
#include "kernels/random.h"
#include "model/head_projection.h"
#include "model/mixers/gla/gla_decode_state.h"
#include "model/mixers/gla/presets.h"
#include "model/wide_gates.h"

namespace linea {

Rwkv6Layer::Rwkv6Layer(ParameterSet& params, const std::string& name, int64_t d_model, const Rwkv6Config& c,
                       double norm_eps, const TensorParallel& tp)
    : d_k_(c.widths.d_k),
      d_v_(c.widths.d_v),
      norm_eps_(norm_eps),
      recompute_(c.recompute),
      spec_(ops::gla_mixer_spec(ops::GlaMixer::rwkv6, c.widths.d_k)),
      shard_(tp.shard_heads(c.widths.heads, "model.rwkv6.heads")),
      heads_(shard_.size()),
      key_width_(heads_ * d_k_),
      value_width_(heads_ * d_v_),
      mu_(params.declare(name + ".x_mu", {d_model}, ParamRole::gate, false)),
      r_proj_(into_heads(params, name + ".r_proj", d_model, c.widths.heads, d_k_, shard_)),
      k_proj_(into_heads(params, name + ".k_proj", d_model, c.widths.heads, d_k_, shard_)),
      v_proj_(into_heads(params, name + ".v_proj", d_model, c.widths.heads, d_v_, shard_)),
      g_proj_(into_heads(params, name + ".g_proj", d_model, c.widths.heads, d_v_, shard_)),
      w_proj_(params, name + ".w_proj", d_model, c.decay_rank, c.widths.heads * d_k_, true, LinearSplit::outputs,
              shard_.channels(d_k_), ops::Activation::tanh),
      bonus_(params.declare(name + ".bonus", {c.widths.heads, d_k_}, ParamRole::gate, false, 0, shard_.heads)),
      norm_weight_(params.declare(name + ".g_norm.weight", {c.widths.heads * d_v_}, ParamRole::vector, false, 0,
                                  shard_.channels(d_v_))),
      norm_bias_(params.declare(name + ".g_norm.bias", {c.widths.heads * d_v_}, ParamRole::vector, false, 0,
                                shard_.channels(d_v_))),
      o_proj_(out_of_heads(params, name + ".o_proj", c.widths.heads, d_v_, d_model, shard_)) {
  // The shift lerps run whole on every rank, for inputs that feed only this rank's heads.
  const bool partial = heads_ < c.widths.heads;
  mu_->partial_grad = partial;
  for (int i = 0; i < kLerps; ++i) {
    lerp_lora_[i].emplace(params, name + ".x_lora." + std::to_string(i), d_model, c.proj_rank, d_model, true,
                          LinearSplit::none, ShardRange{}, ops::Activation::tanh);
    lerp_lora_[i]->set_partial_grad(partial);
  }
}

void Rwkv6Layer::init(Rng& rng, double std) {
  fill_constant(mu_->value, 0.0);
  for (auto& lora : lerp_lora_) lora->init(rng, std);
  r_proj_.init(rng, std);
  k_proj_.init(rng, std);
  v_proj_.init(rng, std);
  g_proj_.init(rng, std);
  w_proj_.init(rng, std);
  fill_constant(bonus_->value, 0.0);
  fill_constant(norm_weight_->value, 1.0);
  fill_constant(norm_bias_->value, 0.0);
  o_proj_.init(rng, std);
}

Rwkv6Layer::Lerps Rwkv6Layer::shift(StepContext& ctx, const Tensor& x, InputHistory* history) const {
  Lerps l;
  if (history) {  // δ of the new tokens, from the previous token of each sequence kept in the history
    l.delta = history->forward(ctx, x, ctx.seqs, [&](const Tensor& in, const SeqLayout& seqs) {
      Tensor delta = ctx.temporary(in.shape());
      ops::token_shift_forward(delta, in, seqs);
      return delta;
    });
  } else {
    l.delta = ctx.temporary(x.shape());
    ops::token_shift_forward(l.delta, x, ctx.seqs);
  }
  l.mixed = ctx.temporary(x.shape());
  ops::lerp_forward(l.mixed, x, l.delta, mu_->compute);
  return l;
}

void Rwkv6Layer::lerp_inputs(StepContext& ctx, const Tensor& x, Lerps& l) const {
  for (int i = 0; i < kLerps; ++i) {
    l.inputs[i] = ctx.temporary(x.shape());
    ops::lerp_forward(l.inputs[i], x, l.delta, m_[i]);
  }
}

ops::GlaInputs Rwkv6Layer::operands(StepContext& ctx) const {
  const int64_t n = r_.dim(0);
  ops::GlaInputs in;
  Tensor w = ctx.scratch.alloc({n, key_width_}, ctx.statistics_dtype());
  ops::exp_decay_forward(w, widened(ctx, w_));
  in.q = r_.reshape({n, heads_, d_k_});
  in.k = k_.reshape({n, heads_, d_k_});
  in.v = v_.reshape({n, heads_, d_v_});
  in.g = w.reshape({n, heads_, d_k_});
  in.u = gate_parameter(ctx, *bonus_).value;
  return in;
}

Rwkv6Layer::Normed Rwkv6Layer::group_norm(StepContext& ctx) const {
  const int64_t n = o_.dim(0);
  Normed gn{ctx.temporary(o_.shape()), ctx.scratch.alloc({n, heads_}, ctx.statistics_dtype()),
            ctx.scratch.alloc({n, heads_}, ctx.statistics_dtype())};
  ops::group_norm_forward(gn.y, gn.mean, gn.rstd, o_, norm_weight_->compute, norm_bias_->compute, heads_, norm_eps_);
  return gn;
}

Tensor Rwkv6Layer::run(StepContext& ctx, const Tensor& x, GlaDecodeState* state) {
  const int64_t n = x.dim(0);
  Lerps l = shift(ctx, x, state ? &state->histories[0] : nullptr);
  for (int i = 0; i < kLerps; ++i) m_[i] = lerp_lora_[i]->forward(ctx, l.mixed);
  lerp_inputs(ctx, x, l);
  r_ = r_proj_.forward(ctx, l.inputs[0]);
  w_ = w_proj_.forward(ctx, l.inputs[1]);
  k_ = k_proj_.forward(ctx, l.inputs[2]);
  v_ = v_proj_.forward(ctx, l.inputs[3]);
  g_ = g_proj_.forward(ctx, l.inputs[4]);
  o_ = ctx.activation({n, value_width_});
  saved_ = gla_forward_continuing(ctx, spec_, operands(ctx), o_.reshape({n, heads_, d_v_}), state, recompute_);
  const Normed gn = group_norm(ctx);
  Tensor y = ctx.temporary(o_.shape());
  ops::swiglu_forward(y, g_, gn.y);  // silu(g) ⊙ GroupNorm(o)
  return o_proj_.forward(ctx, y);
}

void Rwkv6Layer::backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) {
  const int64_t n = dy.dim(0);
  const Normed gn = group_norm(ctx);
  Tensor y = ctx.temporary(o_.shape());
  ops::swiglu_forward(y, g_, gn.y);
  Tensor dgated = ctx.temporary(o_.shape());
  o_proj_.backward(y, dy, dgated, false);
  Tensor dg = ctx.temporary(o_.shape()), dnormed = ctx.temporary(o_.shape()), d_o = ctx.temporary(o_.shape());
  ops::swiglu_backward(dg, dnormed, dgated, g_, gn.y);
  ops::group_norm_backward(d_o, norm_weight_->compute_grad, norm_bias_->compute_grad, dnormed, o_,
                           norm_weight_->compute, gn.mean, gn.rstd, heads_);

  const ops::GlaInputs in = operands(ctx);
  ops::GlaGrads grads;
  grads.dq = ctx.temporary({n, heads_, d_k_});
  grads.dk = ctx.temporary({n, heads_, d_k_});
  grads.dv = ctx.temporary({n, heads_, d_v_});
  grads.dg = ctx.scratch.alloc({n, heads_, d_k_}, in.g.dtype());
  grads.du = ctx.scratch.alloc(bonus_->shape, in.u.dtype());
  ops::gla_backward(ops::GlaImpl::chunked, spec_, ctx.seqs, in, d_o.reshape({n, heads_, d_v_}), Tensor(), grads,
                    saved_);
  ops::add_inplace(gate_parameter(ctx, *bonus_).grad, grads.du);
  Tensor dw = ctx.scratch.alloc({n, key_width_}, in.g.dtype());
  ops::exp_decay_backward(dw, grads.dg.reshape({n, key_width_}), in.g.reshape({n, key_width_}));

  // Back through the projections to the five lerped inputs, then through the lerps.
  Lerps l = shift(ctx, x);
  lerp_inputs(ctx, x, l);
  std::array<Tensor, kLerps> dinputs;
  for (Tensor& d : dinputs) d = ctx.temporary(x.shape());
  r_proj_.backward(l.inputs[0], grads.dq.reshape({n, key_width_}), dinputs[0], false);
  w_proj_.backward(ctx, l.inputs[1], narrowed(ctx, dw), dinputs[1], false);
  k_proj_.backward(l.inputs[2], grads.dk.reshape({n, key_width_}), dinputs[2], false);
  v_proj_.backward(l.inputs[3], grads.dv.reshape({n, value_width_}), dinputs[3], false);
  g_proj_.backward(l.inputs[4], dg, dinputs[4], false);

  // x_i = x + δ ⊙ m_i, m_i = LoRA_i(x̄), x̄ = x + δ ⊙ μ, δ = shift(x)
  Tensor ddelta = ctx.temporary(x.shape()), dmixed = ctx.temporary(x.shape()), dm = ctx.temporary(x.shape());
  ddelta.zero();
  dx.copy_from(dinputs[0]);
  for (int i = 0; i < kLerps; ++i) {
    if (i > 0) ops::add_inplace(dx, dinputs[i]);
    ops::lerp_backward(ddelta, dm, dinputs[i], l.delta, m_[i]);
    lerp_lora_[i]->backward(ctx, l.mixed, dm, dmixed, i > 0);
  }
  ops::add_inplace(dx, dmixed);
  ops::lerp_backward(ddelta, mu_->compute_grad, dmixed, l.delta, mu_->compute);
  Tensor dshift = ctx.temporary(x.shape());
  ops::token_shift_backward(dshift, ddelta, ctx.seqs);
  ops::add_inplace(dx, dshift);
}

}  // namespace linea
