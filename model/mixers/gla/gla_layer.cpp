#include "model/mixers/gla/gla_layer.h"

#include <cmath>

#include "kernels/random.h"
#include "model/head_projection.h"
#include "model/mixers/gla/gla_decode_state.h"
#include "model/mixers/gla/presets.h"
#include "model/optional_short_conv.h"
#include "model/wide_gates.h"

namespace linea {

namespace {
constexpr const char* kHeadsKey = "model.<mixer>.heads";
}  // namespace

GlaLayer::GlaLayer(ParameterSet& params, const std::string& name, int64_t d_model, const GlaConfig& c, double norm_eps,
                   const TensorParallel& tp)
    : GlaLayer(params, name, d_model,
               Shape{false, c.widths.heads, c.widths.d_k, c.widths.d_v, c.gate_rank, c.gate_normalizer, c.output_gate,
                     0.0, c.conv, c.recompute},
               norm_eps, tp) {}

GlaLayer::GlaLayer(ParameterSet& params, const std::string& name, int64_t d_model, const RetNetConfig& c,
                   double norm_eps, const TensorParallel& tp)
    : GlaLayer(params, name, d_model,
               Shape{true, c.widths.heads, c.widths.d_k, c.widths.d_v, 0, 1.0, true, c.rope_theta, c.conv, c.recompute},
               norm_eps, tp) {}

GlaLayer::GlaLayer(ParameterSet& params, const std::string& name, int64_t d_model, const Shape& s, double norm_eps,
                   const TensorParallel& tp)
    : shape_(s),
      spec_(ops::gla_mixer_spec(s.retnet ? ops::GlaMixer::retnet : ops::GlaMixer::gla, s.d_k)),
      shard_(tp.shard_heads(s.heads, kHeadsKey)),
      heads_(shard_.size()),
      key_width_(heads_ * s.d_k),
      value_width_(heads_ * s.d_v),
      q_proj_(into_heads(params, name + ".q_proj", d_model, s.heads, s.d_k, shard_)),
      k_proj_(into_heads(params, name + ".k_proj", d_model, s.heads, s.d_k, shard_)),
      v_proj_(into_heads(params, name + ".v_proj", d_model, s.heads, s.d_v, shard_)),
      output_(params, name + ".g_norm", name + ".o_proj", s.heads, s.d_v, d_model, shard_,
              s.output_gate ? ops::GateActivation::silu : ops::GateActivation::none, norm_eps) {
  if (s.conv > 0) {
    q_conv_.emplace(params, name + ".q_conv1d", s.heads * s.d_k, s.conv, shard_.channels(s.d_k));
    k_conv_.emplace(params, name + ".k_conv1d", s.heads * s.d_k, s.conv, shard_.channels(s.d_k));
    v_conv_.emplace(params, name + ".v_conv1d", s.heads * s.d_v, s.conv, shard_.channels(s.d_v));
  }
  if (!s.retnet) {
    gk_proj_.emplace(params, name + ".gk_proj", d_model, s.gate_rank, s.heads * s.d_k, true, LinearSplit::outputs,
                     shard_.channels(s.d_k));
  }
  if (s.output_gate) {
    g_proj_.emplace(into_heads(params, name + ".g_proj", d_model, s.heads, s.d_v, shard_));
  }
}

void GlaLayer::init(Rng& rng, double std) {
  q_proj_.init(rng, std);
  k_proj_.init(rng, std);
  v_proj_.init(rng, std);
  if (q_conv_) {
    q_conv_->init(rng, std);
    k_conv_->init(rng, std);
    v_conv_->init(rng, std);
  }
  if (gk_proj_) gk_proj_->init(rng, std);
  if (g_proj_) g_proj_->init(rng, std);
  output_.init(rng, std);
}

ops::GlaInputs GlaLayer::operands(StepContext& ctx, GlaDecodeState* state) {
  const int64_t n = q_.dim(0), H = heads_, K = shape_.d_k;
  // The histories of q, k, v in the state's order (start_state).
  InputHistory* histories = state && q_conv_ ? state->histories.data() : nullptr;
  const Tensor q = conv_forward(ctx, q_conv_, q_, histories ? &histories[0] : nullptr);
  const Tensor k = conv_forward(ctx, k_conv_, k_, histories ? &histories[1] : nullptr);
  ops::GlaInputs in;
  in.v = conv_forward(ctx, v_conv_, v_, histories ? &histories[2] : nullptr).reshape({n, H, shape_.d_v});
  if (shape_.retnet) {
    in.q = ctx.temporary({n, H, K});
    in.k = ctx.temporary({n, H, K});
    in.q.copy_from(q.reshape({n, H, K}));
    in.k.copy_from(k.reshape({n, H, K}));
    ops::rope_apply(in.q.reshape({n, key_width_}), ctx.positions, H, shape_.rope_theta, /*inverse=*/false);
    ops::rope_apply(in.k.reshape({n, key_width_}), ctx.positions, H, shape_.rope_theta, /*inverse=*/false);
    const Tensor g = ops::retnet_log_decays(H, shard_.heads.begin, ctx.statistics_dtype());
    if (q_.device() == Device::cpu) {
      in.g = g;
    } else {
      in.g = ctx.scratch.alloc({H}, g.dtype());
      in.g.copy_from(g);
    }
  } else {
    in.q = q.reshape({n, H, K});
    in.k = k.reshape({n, H, K});
    Tensor g = ctx.scratch.alloc({n, key_width_}, ctx.statistics_dtype());
    ops::log_forget_gate_forward(g, widened(ctx, gk_), Tensor(), shape_.gate_normalizer);
    in.g = g.reshape({n, H, K});
  }
  return in;
}

Tensor GlaLayer::run(StepContext& ctx, const Tensor& x, GlaDecodeState* state) {
  const int64_t n = x.dim(0);
  q_ = q_proj_.forward(ctx, x);
  k_ = k_proj_.forward(ctx, x);
  v_ = v_proj_.forward(ctx, x);
  if (gk_proj_) gk_ = gk_proj_->forward(ctx, x);
  z_ = g_proj_ ? g_proj_->forward(ctx, x) : Tensor();
  o_ = ctx.activation({n, value_width_});
  saved_ = gla_forward_continuing(ctx, spec_, operands(ctx, state), o_.reshape({n, heads_, shape_.d_v}), state,
                                  shape_.recompute);
  return output_.forward(ctx, o_, z_);
}

void GlaLayer::backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) {
  const int64_t n = dy.dim(0), H = heads_, K = shape_.d_k, V = shape_.d_v;
  const auto [d_o, dz] = output_.backward(ctx, o_, z_, dy);

  const ops::GlaInputs in = operands(ctx);
  ops::GlaGrads grads;
  grads.dq = ctx.temporary({n, H, K});
  grads.dk = ctx.temporary({n, H, K});
  grads.dv = ctx.temporary({n, H, V});
  if (!shape_.retnet) grads.dg = ctx.scratch.alloc({n, H, K}, ctx.statistics_dtype());
  ops::gla_backward(ops::GlaImpl::chunked, spec_, ctx.seqs, in, d_o.reshape({n, H, V}), Tensor(), grads, saved_);

  Tensor dq = grads.dq.reshape({n, key_width_}), dk = grads.dk.reshape({n, key_width_});
  if (shape_.retnet) {  // back through the rotation: the rotation by −θ
    ops::rope_apply(dq, ctx.positions, H, shape_.rope_theta, /*inverse=*/true);
    ops::rope_apply(dk, ctx.positions, H, shape_.rope_theta, /*inverse=*/true);
  }
  q_proj_.backward(x, conv_backward(ctx, q_conv_, q_, dq), dx, false);
  k_proj_.backward(x, conv_backward(ctx, k_conv_, k_, dk), dx, true);
  v_proj_.backward(x, conv_backward(ctx, v_conv_, v_, grads.dv.reshape({n, value_width_})), dx, true);
  if (gk_proj_) {
    const Tensor logits = widened(ctx, gk_);
    Tensor dlogits = ctx.scratch.alloc({n, key_width_}, logits.dtype());
    ops::log_forget_gate_backward(dlogits, Tensor(), grads.dg.reshape({n, key_width_}), logits, Tensor(),
                                  shape_.gate_normalizer);
    gk_proj_->backward(ctx, x, narrowed(ctx, dlogits), dx, true);
  }
  if (g_proj_) g_proj_->backward(x, dz, dx, true);
}

}  // namespace linea
