#include "model/mixers/delta_rule/delta_rule_layer.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/random.h"
#include "model/decay_gate_init.h"
#include "model/mixers/delta_rule/delta_rule_decode_state.h"

namespace linea {

namespace {

constexpr double kL2NormEps = 1e-6;  // fla's l2norm: x / sqrt(Σx² + 1e-6)

// GDN-2's erase and write gates (b: D → H·K, a matrix; w: D → H·V) instead of β (D → H, a gate).
bool erase_write(const DeltaRuleConfig& config) { return config.preset.gate == ops::GateKind::erase_write; }

}  // namespace

DeltaRuleLayer::DeltaRuleLayer(ParameterSet& params, const std::string& name, int64_t d_model,
                               const DeltaRuleConfig& config, double norm_eps, const TensorParallel& tp)
    : config_(config),
      norm_eps_(norm_eps),
      spec_(config.spec()),
      output_act_(config.output_activation()),
      erase_scale_(config.allow_neg_eigval ? 2.0 : 1.0),
      shard_(tp.shard_heads(config.heads, config.section + ".heads")),
      heads_(shard_.size()),
      key_width_(heads_ * config.d_k),
      value_width_(heads_ * config.d_v),
      q_proj_(params, name + ".q_proj", d_model, config.heads * config.d_k, false, ParamRole::matrix,
              LinearSplit::outputs, shard_.channels(config.d_k)),
      k_proj_(params, name + ".k_proj", d_model, config.heads * config.d_k, false, ParamRole::matrix,
              LinearSplit::outputs, shard_.channels(config.d_k)),
      v_proj_(params, name + ".v_proj", d_model, config.heads * config.d_v, false, ParamRole::matrix,
              LinearSplit::outputs, shard_.channels(config.d_v)),
      b_proj_(params, name + ".b_proj", d_model, erase_write(config) ? config.heads * config.d_k : config.heads, false,
              erase_write(config) ? ParamRole::matrix : ParamRole::gate, LinearSplit::outputs,
              shard_.channels(erase_write(config) ? config.d_k : 1)),
      o_norm_(params.declare(name + ".o_norm.weight", {config.d_v}, ParamRole::vector, false)),
      o_proj_(params, name + ".o_proj", config.heads * config.d_v, d_model, false, ParamRole::matrix,
              LinearSplit::inputs, shard_.channels(config.d_v)) {
  const int64_t full_keys = config.heads * config.d_k, full_values = config.heads * config.d_v;
  o_norm_->partial_grad = heads_ < config.heads;
  if (spec_.gate == ops::GateKind::erase_write) {
    w_proj_.emplace(params, name + ".w_proj", d_model, full_values, false, ParamRole::matrix, LinearSplit::outputs,
                    shard_.channels(config.d_v));
  }
  if (spec_.decay == ops::DecayKind::scalar) {
    a_proj_.emplace(params, name + ".a_proj", d_model, config.heads, false, ParamRole::gate, LinearSplit::outputs,
                    shard_.heads);
  } else if (spec_.decay == ops::DecayKind::channel) {
    f_proj_.emplace(params, name + ".f_proj", d_model, config.decay_rank, full_keys, false, LinearSplit::outputs,
                    shard_.channels(config.d_k));
  }
  if (spec_.decay != ops::DecayKind::none) {
    A_log_ = params.declare(name + ".A_log", {config.heads}, ParamRole::gate, false, 0, shard_.heads);
    const bool scalar = spec_.decay == ops::DecayKind::scalar;
    dt_bias_ = params.declare(name + ".dt_bias", {scalar ? config.heads : full_keys}, ParamRole::gate, false, 0,
                              shard_.channels(scalar ? 1 : config.d_k));
  }
  if (config.conv > 0) {
    q_conv_.emplace(params, name + ".q_conv1d", full_keys, config.conv, shard_.channels(config.d_k));
    k_conv_.emplace(params, name + ".k_conv1d", full_keys, config.conv, shard_.channels(config.d_k));
    v_conv_.emplace(params, name + ".v_conv1d", full_values, config.conv, shard_.channels(config.d_v));
  }
  if (output_act_ == ops::GateActivation::silu) {
    g_proj_.emplace(params, name + ".g_proj", d_model, full_values, false, ParamRole::matrix, LinearSplit::outputs,
                    shard_.channels(config.d_v));
  } else if (output_act_ == ops::GateActivation::sigmoid) {
    g_proj_lowrank_.emplace(params, name + ".g_proj", d_model, config.gate_rank, full_values, true,
                            LinearSplit::outputs, shard_.channels(config.d_v));
  }
}

void DeltaRuleLayer::init(Rng& rng, double std) {
  q_proj_.init(rng, std);
  k_proj_.init(rng, std);
  v_proj_.init(rng, std);
  b_proj_.init(rng, std);
  if (w_proj_) w_proj_->init(rng, std);
  if (a_proj_) a_proj_->init(rng, std);
  if (f_proj_) f_proj_->init(rng, std);
  if (A_log_) {
    // A ~ U(0, 16) for a scalar decay (GDN), U(1, 16) per channel (KDA, GDN-2).
    init_a_log(*A_log_, rng, spec_.decay == ops::DecayKind::scalar ? 0.0 : 1.0);
    init_dt_bias(*dt_bias_, rng);
  }
  if (q_conv_) {
    q_conv_->init(rng, std);
    k_conv_->init(rng, std);
    v_conv_->init(rng, std);
  }
  if (g_proj_) g_proj_->init(rng, std);
  if (g_proj_lowrank_) g_proj_lowrank_->init(rng, std);
  fill_constant(o_norm_->value, 1.0);
  o_proj_.init(rng, std);
}

Tensor DeltaRuleLayer::conv_forward(StepContext& ctx, std::optional<ShortConv>& conv, const Tensor& x,
                                    InputHistory* history) {
  if (!conv) return x;
  return history ? conv->forward_continuing(ctx, x, *history) : conv->forward(ctx, x);
}

Tensor DeltaRuleLayer::conv_backward(StepContext& ctx, std::optional<ShortConv>& conv, const Tensor& x,
                                     const Tensor& dy) {
  if (!conv) return dy;
  Tensor dx = ctx.temporary(dy.shape());
  conv->backward(ctx, x, dy, dx);
  return dx;
}

DeltaRuleLayer::Operands DeltaRuleLayer::operands(StepContext& ctx, DecodeState* state) {
  const int64_t n = q_in_.dim(0), H = heads_, K = config_.d_k, V = config_.d_v;
  Operands op;
  op.in.q = ctx.temporary({n, H, K});
  op.in.k = ctx.temporary({n, H, K});
  op.q_rstd = ctx.scratch.alloc({n, H}, ctx.statistics_dtype());
  op.k_rstd = ctx.scratch.alloc({n, H}, ctx.statistics_dtype());
  ops::l2norm_forward(op.in.q.reshape({n, key_width_}), op.q_rstd,
                      conv_forward(ctx, q_conv_, q_in_, state ? &state->q_conv : nullptr), H, kL2NormEps);
  ops::l2norm_forward(op.in.k.reshape({n, key_width_}), op.k_rstd,
                      conv_forward(ctx, k_conv_, k_in_, state ? &state->k_conv : nullptr), H, kL2NormEps);
  op.in.v = conv_forward(ctx, v_conv_, v_in_, state ? &state->v_conv : nullptr).reshape({n, H, V});
  if (spec_.gate == ops::GateKind::erase_write) {
    op.in.b = erase_.reshape({n, H, K});
    op.in.w = write_.reshape({n, H, V});
  } else {
    op.in.beta = beta_;
  }
  if (spec_.decay != ops::DecayKind::none) {
    // The gate runs in the master dtype on the master A_log and dt_bias (g must be f32 at least).
    Tensor g = ctx.scratch.alloc(decay_in_.shape(), ctx.master_dtype);
    ops::decay_gate_forward(g, decay_in_, A_log_->value, dt_bias_->value);
    op.in.g = spec_.decay == ops::DecayKind::scalar ? g : g.reshape({n, H, K});
  }
  return op;
}

Tensor DeltaRuleLayer::forward(StepContext& ctx, const Tensor& x) { return run(ctx, x, nullptr); }

Tensor DeltaRuleLayer::run(StepContext& ctx, const Tensor& x, DecodeState* state) {
  const int64_t n = x.dim(0), H = heads_, V = config_.d_v;
  q_in_ = q_proj_.forward(ctx, x);
  k_in_ = k_proj_.forward(ctx, x);
  v_in_ = v_proj_.forward(ctx, x);

  // The gates are kept; the logits they come from are temporaries.
  if (spec_.gate == ops::GateKind::erase_write) {
    erase_ = ctx.activation({n, key_width_});
    write_ = ctx.activation({n, value_width_});
    Tensor erase_logits = ctx.temporary({n, key_width_});
    b_proj_.forward(x, erase_logits);
    ops::sigmoid_gate_forward(erase_, erase_logits, erase_scale_);
    Tensor write_logits = ctx.temporary({n, value_width_});
    w_proj_->forward(x, write_logits);
    ops::sigmoid_gate_forward(write_, write_logits, 1.0);
  } else {
    beta_ = ctx.activation({n, H});
    Tensor logits = ctx.temporary({n, H});
    b_proj_.forward(x, logits);
    ops::sigmoid_gate_forward(beta_, logits, erase_scale_);
  }

  if (spec_.decay != ops::DecayKind::none) {
    // W_a x or W_f x is kept in the master dtype only (projected into a temporary when that is
    // not the step's dtype).
    const int64_t width = a_proj_ ? a_proj_->out_features() : key_width_;
    decay_in_ = ctx.activations.alloc({n, width}, ctx.master_dtype);
    const bool converted = ctx.master_dtype != ctx.dtype;
    Tensor projected = converted ? ctx.temporary({n, width}) : decay_in_;
    if (a_proj_) {
      a_proj_->forward(x, projected);
    } else {
      f_proj_->forward(ctx, x, projected);
    }
    if (converted) ops::convert(decay_in_, projected);
  }

  o_ = ctx.activation({n, value_width_});
  if (state) {
    state->advance(ctx, spec_, operands(ctx, state).in, o_.reshape({n, H, V}));
  } else {
    ops::delta_rule_forward(ops::DeltaRuleImpl::chunked, spec_, ctx.seqs, operands(ctx).in, o_.reshape({n, H, V}),
                            Tensor());
  }

  z_ = g_proj_ ? g_proj_->forward(ctx, x) : g_proj_lowrank_ ? g_proj_lowrank_->forward(ctx, x) : Tensor();
  Tensor y = ctx.temporary({n, value_width_});
  Tensor o_rstd = ctx.scratch.alloc({n, H}, ctx.statistics_dtype());
  ops::gated_rmsnorm_forward(y, o_rstd, o_, z_, o_norm_->compute, H, output_act_, norm_eps_);
  return o_proj_.forward(ctx, y);
}

void DeltaRuleLayer::backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) {
  const int64_t n = dy.dim(0), H = heads_, K = config_.d_k, V = config_.d_v;
  // y = norm(o) ⊙ act(z) again: o_proj's weight gradient reads it, the norm's backward its rstd.
  Tensor y = ctx.temporary({n, value_width_});
  Tensor o_rstd = ctx.scratch.alloc({n, H}, ctx.statistics_dtype());
  ops::gated_rmsnorm_forward(y, o_rstd, o_, z_, o_norm_->compute, H, output_act_, norm_eps_);
  Tensor dnormed = ctx.temporary({n, value_width_});
  o_proj_.backward(y, dy, dnormed, false);
  Tensor d_o = ctx.temporary({n, value_width_});
  Tensor dz = z_.defined() ? ctx.temporary({n, value_width_}) : Tensor();
  ops::gated_rmsnorm_backward(d_o, dz, o_norm_->compute_grad, dnormed, o_, z_, o_norm_->compute, o_rstd, H,
                              output_act_);

  const Operands op = operands(ctx);
  ops::DeltaRuleGrads grads;
  grads.dq = ctx.temporary({n, H, K});
  grads.dk = ctx.temporary({n, H, K});
  grads.dv = ctx.temporary({n, H, V});
  if (spec_.gate == ops::GateKind::erase_write) {
    grads.db = ctx.temporary({n, H, K});
    grads.dw = ctx.temporary({n, H, V});
  } else {
    grads.dbeta = ctx.temporary({n, H});
  }
  if (op.in.g.defined()) grads.dg = ctx.scratch.alloc(op.in.g.shape(), op.in.g.dtype());
  ops::delta_rule_backward(ops::DeltaRuleImpl::chunked, spec_, ctx.seqs, op.in, d_o.reshape({n, H, V}), Tensor(),
                           grads);

  // q, k: back through the L2 norm and the conv to the projections.
  Tensor dq_conv = ctx.temporary({n, key_width_});
  ops::l2norm_backward(dq_conv, grads.dq.reshape({n, key_width_}), op.in.q.reshape({n, key_width_}), op.q_rstd, H);
  q_proj_.backward(x, conv_backward(ctx, q_conv_, q_in_, dq_conv), dx, false);
  Tensor dk_conv = ctx.temporary({n, key_width_});
  ops::l2norm_backward(dk_conv, grads.dk.reshape({n, key_width_}), op.in.k.reshape({n, key_width_}), op.k_rstd, H);
  k_proj_.backward(x, conv_backward(ctx, k_conv_, k_in_, dk_conv), dx, true);
  v_proj_.backward(x, conv_backward(ctx, v_conv_, v_in_, grads.dv.reshape({n, value_width_})), dx, true);

  if (spec_.gate == ops::GateKind::erase_write) {
    Tensor db_logits = ctx.temporary({n, key_width_});
    ops::sigmoid_gate_backward(db_logits, grads.db.reshape({n, key_width_}), erase_, erase_scale_);
    b_proj_.backward(x, db_logits, dx, true);
    Tensor dw_logits = ctx.temporary({n, value_width_});
    ops::sigmoid_gate_backward(dw_logits, grads.dw.reshape({n, value_width_}), write_, 1.0);
    w_proj_->backward(x, dw_logits, dx, true);
  } else {
    Tensor dbeta_logits = ctx.temporary({n, H});
    ops::sigmoid_gate_backward(dbeta_logits, grads.dbeta, beta_, erase_scale_);
    b_proj_.backward(x, dbeta_logits, dx, true);
  }

  if (spec_.decay != ops::DecayKind::none) {
    Tensor ddecay_in = ctx.scratch.alloc(decay_in_.shape(), decay_in_.dtype());
    ops::decay_gate_backward(ddecay_in, A_log_->grad, dt_bias_->grad, grads.dg.reshape(decay_in_.shape()), decay_in_,
                             A_log_->value, dt_bias_->value);
    if (ddecay_in.dtype() != ctx.dtype) {
      Tensor converted = ctx.temporary(ddecay_in.shape());
      ops::convert(converted, ddecay_in);
      ddecay_in = converted;
    }
    if (a_proj_) {
      a_proj_->backward(x, ddecay_in, dx, true);
    } else {
      f_proj_->backward(ctx, x, ddecay_in, dx, true);
    }
  }

  if (g_proj_) g_proj_->backward(x, dz, dx, true);
  if (g_proj_lowrank_) g_proj_lowrank_->backward(ctx, x, dz, dx, true);
}

}  // namespace linea
