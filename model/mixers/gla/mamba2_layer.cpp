#include "model/mixers/gla/mamba2_layer.h"

#include "kernels/ops.h"
#include "kernels/random.h"
#include "model/decay_gate_init.h"
#include "model/head_projection.h"
#include "model/mixers/gla/gla_decode_state.h"
#include "model/mixers/gla/presets.h"
#include "model/optional_short_conv.h"
#include "model/wide_gates.h"

namespace linea {

Mamba2Layer::Mamba2Layer(ParameterSet& params, const std::string& name, int64_t d_model, const Mamba2Config& c,
                         double norm_eps, const TensorParallel& tp)
    : config_(c),
      spec_(ops::gla_mixer_spec(ops::GlaMixer::mamba2, c.state_size)),
      shard_(tp.shard_heads(c.heads, "model.mamba2 heads (expand · d_model / head_dim)")),
      heads_(shard_.size()),
      inner_(heads_ * c.head_dim),
      z_proj_(into_heads(params, name + ".z_proj", d_model, c.heads, c.head_dim, shard_)),
      x_proj_(into_heads(params, name + ".x_proj", d_model, c.heads, c.head_dim, shard_)),
      B_proj_(params, name + ".B_proj", d_model, c.state_size, false),
      C_proj_(params, name + ".C_proj", d_model, c.state_size, false),
      dt_proj_(params, name + ".dt_proj", d_model, c.heads, false, ParamRole::gate, LinearSplit::outputs, shard_.heads),
      x_conv_(params, name + ".x_conv1d", c.inner, c.conv, shard_.channels(c.head_dim), /*bias=*/true),
      B_conv_(params, name + ".B_conv1d", c.state_size, c.conv, std::nullopt, /*bias=*/true),
      C_conv_(params, name + ".C_conv1d", c.state_size, c.conv, std::nullopt, /*bias=*/true),
      A_log_(params.declare(name + ".A_log", {c.heads}, ParamRole::gate, false, 0, shard_.heads)),
      dt_bias_(params.declare(name + ".dt_bias", {c.heads}, ParamRole::gate, false, 0, shard_.heads)),
      D_(params.declare(name + ".D", {c.heads}, ParamRole::gate, false, 0, shard_.heads)),
      output_(params, name + ".norm", name + ".out_proj", c.inner, d_model, shard_.channels(c.head_dim),
              ops::GateActivation::none, norm_eps, tp) {
  // B and C serve every head: each rank's backward gives the part through its own heads.
  const bool partial = heads_ < c.heads;
  B_proj_.weight().partial_grad = C_proj_.weight().partial_grad = partial;
  B_conv_.set_partial_grad(partial);
  C_conv_.set_partial_grad(partial);
}

void Mamba2Layer::init(Rng& rng, double std) {
  z_proj_.init(rng, std);
  x_proj_.init(rng, std);
  B_proj_.init(rng, std);
  C_proj_.init(rng, std);
  dt_proj_.init(rng, std);
  x_conv_.init(rng, std);
  B_conv_.init(rng, std);
  C_conv_.init(rng, std);
  init_a_log(*A_log_, rng, 1.0);
  init_dt_bias(*dt_bias_, rng, config_.dt_min, config_.dt_max, config_.dt_floor);
  fill_constant(D_->value, 1.0);
  output_.init(rng, std);
}

Mamba2Layer::Operands Mamba2Layer::operands(StepContext& ctx, GlaDecodeState* state) {
  const int64_t n = z_.dim(0), H = heads_, P = config_.head_dim, N = config_.state_size;
  Operands op;
  op.xc = conv_forward_continuing(ctx, x_conv_, xs_, state ? &state->histories[0] : nullptr);
  op.bc = conv_forward_continuing(ctx, B_conv_, B_, state ? &state->histories[1] : nullptr);
  op.cc = conv_forward_continuing(ctx, C_conv_, C_, state ? &state->histories[2] : nullptr);
  op.dt = widened(ctx, dt_);
  const GateParameter A_log = gate_parameter(ctx, *A_log_), dt_bias = gate_parameter(ctx, *dt_bias_);
  Tensor g = ctx.scratch.alloc({n, H}, op.dt.dtype()), delta = ctx.scratch.alloc({n, H}, op.dt.dtype());
  ops::ssd_gate_forward(g, delta, op.dt, A_log.value, dt_bias.value);
  op.delta = narrowed(ctx, delta);
  Tensor v = ctx.temporary({n, inner_});
  ops::scale_heads_forward(v, op.xc, op.delta);
  Tensor q = ctx.temporary({n, H * N}), k = ctx.temporary({n, H * N});
  ops::repeat_heads(q, op.cc, H);
  ops::repeat_heads(k, op.bc, H);
  op.in.q = q.reshape({n, H, N});
  op.in.k = k.reshape({n, H, N});
  op.in.v = v.reshape({n, H, P});
  op.in.g = g;
  return op;
}

Tensor Mamba2Layer::skip(StepContext& ctx, const Operands& op) const {
  Tensor y = ctx.temporary(o_.shape());
  y.copy_from(o_);
  ops::add_scaled_heads_forward(y, op.xc, D_->compute);
  return y;
}

Tensor Mamba2Layer::gated(StepContext& ctx, const Tensor& y) const {
  Tensor yz = ctx.temporary(y.shape());
  ops::swiglu_forward(yz, z_, y);  // silu(z) ⊙ y
  return yz;
}

Tensor Mamba2Layer::run(StepContext& ctx, const Tensor& x, GlaDecodeState* state) {
  const int64_t n = x.dim(0);
  z_ = z_proj_.forward(ctx, x);
  xs_ = x_proj_.forward(ctx, x);
  B_ = B_proj_.forward(ctx, x);
  C_ = C_proj_.forward(ctx, x);
  dt_ = dt_proj_.forward(ctx, x);
  const Operands op = operands(ctx, state);
  o_ = ctx.activation({n, inner_});
  saved_ =
      gla_forward_continuing(ctx, spec_, op.in, o_.reshape({n, heads_, config_.head_dim}), state, config_.recompute);
  return output_.forward(ctx, gated(ctx, skip(ctx, op)), Tensor());
}

void Mamba2Layer::backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) {
  const int64_t n = dy.dim(0), H = heads_, P = config_.head_dim, N = config_.state_size;
  const Operands op = operands(ctx);
  const Tensor y = skip(ctx, op), yz = gated(ctx, y);
  const Tensor dyz = output_.backward(ctx, yz, Tensor(), dy).dx;
  Tensor dz = ctx.temporary({n, inner_}), dskip = ctx.temporary({n, inner_});
  ops::swiglu_backward(dz, dskip, dyz, z_, y);

  // y = o + D ⊙ x_c: o's gradient is dskip; x_c's and D's below.
  ops::GlaGrads grads;
  grads.dq = ctx.temporary({n, H, N});
  grads.dk = ctx.temporary({n, H, N});
  grads.dv = ctx.temporary({n, H, P});
  grads.dg = ctx.scratch.alloc({n, H}, op.in.g.dtype());
  ops::gla_backward(ops::GlaImpl::chunked, spec_, ctx.seqs, op.in, dskip.reshape({n, H, P}), Tensor(), grads, saved_);
  Tensor dxc = ctx.temporary({n, inner_}), ddelta = ctx.temporary({n, H});
  ops::scale_heads_backward(dxc, ddelta, grads.dv.reshape({n, inner_}), op.xc, op.delta);
  ops::add_scaled_heads_backward(dxc, D_->compute_grad, dskip, op.xc, D_->compute);
  Tensor dbc = ctx.temporary({n, N}), dcc = ctx.temporary({n, N});
  ops::sum_heads(dbc, grads.dk.reshape({n, H * N}), H);
  ops::sum_heads(dcc, grads.dq.reshape({n, H * N}), H);
  const GateParameter A_log = gate_parameter(ctx, *A_log_), dt_bias = gate_parameter(ctx, *dt_bias_);
  Tensor ddt = ctx.scratch.alloc({n, H}, op.dt.dtype());
  ops::ssd_gate_backward(ddt, A_log.grad, dt_bias.grad, grads.dg, widened(ctx, ddelta), op.dt, A_log.value,
                         dt_bias.value);

  Tensor dxs = ctx.temporary({n, inner_}), dB = ctx.temporary({n, N}), dC = ctx.temporary({n, N});
  x_conv_.backward(ctx, xs_, dxc, dxs);
  B_conv_.backward(ctx, B_, dbc, dB);
  C_conv_.backward(ctx, C_, dcc, dC);
  z_proj_.backward(x, dz, dx, false);
  x_proj_.backward(x, dxs, dx, true);
  B_proj_.backward(x, dB, dx, true);
  C_proj_.backward(x, dC, dx, true);
  dt_proj_.backward(x, narrowed(ctx, ddt), dx, true);
}

}  // namespace linea
