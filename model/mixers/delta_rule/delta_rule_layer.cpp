#include "model/mixers/delta_rule/delta_rule_layer.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/random.h"
#include "model/decay_gate_init.h"
#include "model/head_projection.h"
#include "model/mixers/delta_rule/delta_rule_decode_state.h"
#include "model/optional_short_conv.h"

namespace linea {

namespace {

constexpr double kL2NormEps = 1e-6;  // fla's l2norm: x / sqrt(Σx² + 1e-6)

// GDN-2's erase and write gates (b: D → H·K, a matrix; w: D → H·V) instead of β (D → H, a gate).
bool erase_write(const DeltaRuleConfig& config) { return config.preset.gate == ops::GateKind::erase_write; }

}  // namespace

DeltaRuleLayer::DeltaRuleLayer(ParameterSet& params, const std::string& name, int64_t d_model,
                               const DeltaRuleConfig& config, double norm_eps, const TensorParallel& tp,
                               const LayerRouting* routing)
    : config_(config),
      norm_eps_(norm_eps),
      spec_(config.spec()),
      output_act_(config.output_activation()),
      erase_scale_(config.allow_neg_eigval ? 2.0 : 1.0),
      shard_(tp.shard_heads(config.heads, config.section + ".heads")),
      heads_(shard_.size()),
      key_width_(heads_ * config.d_k),
      value_width_(heads_ * config.d_v),
      q_proj_(into_heads(params, name + ".q_proj", d_model, config.heads, config.d_k, shard_)),
      k_proj_(into_heads(params, name + ".k_proj", d_model, config.heads, config.d_k, shard_)),
      v_proj_(into_heads(params, name + ".v_proj", d_model, config.heads, config.d_v, shard_)),
      b_proj_(params, name + ".b_proj", d_model, erase_write(config) ? config.heads * config.d_k : config.heads, false,
              erase_write(config) ? ParamRole::matrix : ParamRole::gate, LinearSplit::outputs,
              shard_.channels(erase_write(config) ? config.d_k : 1)),
      output_(params, name + ".o_norm", name + ".o_proj", config.heads, config.d_v, d_model, shard_,
              config.output_activation(), norm_eps) {
  const int64_t full_keys = config.heads * config.d_k, full_values = config.heads * config.d_v;
  if (spec_.gate == ops::GateKind::erase_write) {
    w_proj_.emplace(into_heads(params, name + ".w_proj", d_model, config.heads, config.d_v, shard_));
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
    g_proj_.emplace(into_heads(params, name + ".g_proj", d_model, config.heads, config.d_v, shard_));
  } else if (output_act_ == ops::GateActivation::sigmoid) {
    g_proj_lowrank_.emplace(params, name + ".g_proj", d_model, config.gate_rank, full_values, true,
                            LinearSplit::outputs, shard_.channels(config.d_v));
  }

  if (routing) routing_ = *routing;
  if (routing_.send) {
    routing_.send->heads = config.heads;
    routing_.send->d_v = config.d_v;
  }
  if (routing_.receive) {
    const WriteErrorLink& from = *routing_.receive;
    cler_lambda_ =
        params.declare(name + ".cler_lambda", {full_values}, ParamRole::gate, false, 0, shard_.channels(config.d_v));
    if (routing_.always_project || from.heads != config.heads || from.d_v != config.d_v) {
      if (heads_ < config.heads) {
        throw std::invalid_argument("model.routing.projection: " + name +
                                    " receives through a projection Π, which is not yet sharded over tensor "
                                    "parallelism (tp must be 1, or sender and receiver of equal heads and d_v with "
                                    "projection = \"auto\")");
      }
      cler_proj_.emplace(params, name + ".cler_proj", from.heads * from.d_v, full_values, false, ParamRole::matrix);
    }
  }
  if (routing_.sends && routing_.kind == RoutingKind::cler_h) {
    cler_h_norm_ = params.declare(name + ".cler_h_norm.weight", {config.d_v}, ParamRole::vector, false);
    cler_h_norm_->partial_grad = heads_ < config.heads;
  }
  if (routing_.sends && (routing_.kind == RoutingKind::cler_h || routing_.kind == RoutingKind::clvr)) {
    routed_proj_.emplace(out_of_heads(params,
                                      name + (routing_.kind == RoutingKind::cler_h ? ".cler_h_proj" : ".clvr_proj"),
                                      config.heads, config.d_v, d_model, shard_));
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
  output_.init(rng, std);
  // Routing starts as the baseline exactly, and draws nothing from rng.
  if (cler_lambda_) fill_constant(cler_lambda_->value, cler_proj_ ? 1.0 : 0.0);
  if (cler_proj_) fill_constant(cler_proj_->weight().value, 0.0);
  if (cler_h_norm_) fill_constant(cler_h_norm_->value, 1.0);
  if (routed_proj_) fill_constant(routed_proj_->weight().value, 0.0);
}

bool DeltaRuleLayer::needs_write_error() const {
  return routing_.send || (routing_.sends && routing_.kind == RoutingKind::cler_h);
}

Tensor DeltaRuleLayer::received(StepContext& ctx) {
  const Tensor& r = routing_.receive->r;
  if (!cler_proj_) return r;
  Tensor projected = ctx.temporary({r.dim(0), value_width_});
  cler_proj_->forward(r, projected);
  return projected;
}

Tensor DeltaRuleLayer::written_value(StepContext& ctx, const Operands& op) {
  // ṽ = β ⊙ v per head (β: [N, H]), or w ⊙ v per channel (w: [N, H·V], heads of width 1)
  const int64_t n = q_in_.dim(0);
  Tensor written = ctx.temporary({n, value_width_});
  ops::scale_heads_forward(written, op.in.v.reshape({n, value_width_}),
                           spec_.gate == ops::GateKind::beta ? beta_ : write_);
  return written;
}

Tensor DeltaRuleLayer::normed_error(StepContext& ctx, Tensor& rstd) {
  // RMSNorm over each head's V channels, times γ_E
  const int64_t n = r_.dim(0);
  Tensor normed = ctx.temporary({n, value_width_});
  rstd = ctx.scratch.alloc({n, heads_}, ctx.statistics_dtype());
  ops::gated_rmsnorm_forward(normed, rstd, r_, Tensor(), cler_h_norm_->compute, heads_, ops::GateActivation::none,
                             norm_eps_);
  return normed;
}

DeltaRuleLayer::Operands DeltaRuleLayer::operands(StepContext& ctx, DeltaRuleDecodeState* state) {
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
  Tensor v = conv_forward(ctx, v_conv_, v_in_, state ? &state->v_conv : nullptr);
  if (routing_.receive) {
    // CLER: v ← v + Π(r_sender) ⊙ λ
    Tensor routed = ctx.temporary({n, value_width_});
    ops::lerp_forward(routed, v, received(ctx), cler_lambda_->compute);
    v = routed;
  }
  op.in.v = v.reshape({n, H, V});
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

Tensor DeltaRuleLayer::run(StepContext& ctx, const Tensor& x, DeltaRuleDecodeState* state) {
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
  const Operands op = operands(ctx, state);
  if (state) {  // start_state refuses a routed layer, so there is no write error to route
    state->advance(ctx, spec_, op.in, o_.reshape({n, H, V}));
  } else {
    r_ = needs_write_error() ? ctx.activation({n, value_width_}) : Tensor();
    // A call with the write error runs the f32 path on CUDA, which saves nothing (ops::delta_rule_forward).
    const bool saving = ctx.backward_follows && !config_.recompute && !r_.defined();
    const size_t saved_bytes = saving ? ops::delta_rule_saved_bytes(spec_, ctx.seqs, op.in) : 0;
    saved_ = saved_bytes ? ctx.activations.alloc({static_cast<int64_t>((saved_bytes + 1) / 2)}, DType::bf16) : Tensor();
    ops::delta_rule_forward(ops::DeltaRuleImpl::chunked, spec_, ctx.seqs, op.in, o_.reshape({n, H, V}), Tensor(),
                            r_.defined() ? r_.reshape({n, H, V}) : Tensor(), saved_);
  }
  if (routing_.send) {
    routing_.send->r = r_;
    routing_.send->dr = Tensor();  // until the receiver's backward leaves one
  }

  z_ = g_proj_ ? g_proj_->forward(ctx, x) : g_proj_lowrank_ ? g_proj_lowrank_->forward(ctx, x) : Tensor();
  Tensor out = output_.forward(ctx, o_, z_);
  if (routed_proj_) {
    // out += W_E RMSNorm(r) γ_E (CLER-H) or W_V ṽ (CLVR)
    Tensor rstd;
    Tensor term = ctx.temporary(out.shape());
    routed_proj_->forward(routing_.kind == RoutingKind::cler_h ? normed_error(ctx, rstd) : written_value(ctx, op),
                          term);
    ops::add_inplace(out, term);
  }
  return out;
}

void DeltaRuleLayer::backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) {
  const int64_t n = dy.dim(0), H = heads_, K = config_.d_k, V = config_.d_v;
  const auto [d_o, dz] = output_.backward(ctx, o_, z_, dy);

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
  // ∂L/∂r: from CLER's receiver (its backward ran first), or through CLER-H's norm and W_E
  Tensor dr = routing_.send ? routing_.send->dr : Tensor();
  if (routed_proj_ && routing_.kind == RoutingKind::cler_h) {
    Tensor rstd;
    const Tensor normed = normed_error(ctx, rstd);
    Tensor dnormed = ctx.temporary({n, value_width_});
    routed_proj_->backward(normed, dy, dnormed, false);
    dr = ctx.temporary({n, value_width_});
    ops::gated_rmsnorm_backward(dr, Tensor(), cler_h_norm_->compute_grad, dnormed, r_, Tensor(), cler_h_norm_->compute,
                                rstd, H, ops::GateActivation::none);
  }
  ops::delta_rule_backward(ops::DeltaRuleImpl::chunked, spec_, ctx.seqs, op.in, d_o.reshape({n, H, V}), Tensor(), grads,
                           dr.defined() ? dr.reshape({n, H, V}) : Tensor(), saved_);
  if (routed_proj_ && routing_.kind == RoutingKind::clvr) {
    // ṽ = s ⊙ v (s = β per head, or w): dv += s ⊙ dṽ, ds += Σ v ⊙ dṽ
    const Tensor written = written_value(ctx, op);
    Tensor dwritten = ctx.temporary({n, value_width_});
    routed_proj_->backward(written, dy, dwritten, false);
    const Tensor& s = spec_.gate == ops::GateKind::beta ? beta_ : write_;
    Tensor dv = ctx.temporary({n, value_width_});
    Tensor ds = ctx.temporary(s.shape());
    ops::scale_heads_backward(dv, ds, dwritten, op.in.v.reshape({n, value_width_}), s);
    ops::add_inplace(grads.dv.reshape({n, value_width_}), dv);
    ops::add_inplace(spec_.gate == ops::GateKind::beta ? grads.dbeta : grads.dw.reshape({n, value_width_}), ds);
  }
  if (routing_.receive) {
    // v' = v + Π(r) ⊙ λ: dv = dv', dλ += Σ_n Π(r) ⊙ dv', dΠ(r) = λ ⊙ dv' → Π's backward → ∂L/∂r
    const Tensor projected = received(ctx);
    Tensor dprojected = ctx.temporary(projected.shape());
    dprojected.zero();
    ops::lerp_backward(dprojected, cler_lambda_->compute_grad, grads.dv.reshape({n, value_width_}), projected,
                       cler_lambda_->compute);
    WriteErrorLink& link = *routing_.receive;
    if (!routing_.stop_grad) link.dr = ctx.activation(link.r.shape());
    if (cler_proj_) {
      cler_proj_->backward(link.r, dprojected, link.dr, false);
    } else if (!routing_.stop_grad) {
      link.dr.copy_from(dprojected);
    }
  }

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
