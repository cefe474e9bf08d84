#include "model/block.h"

#include "kernels/ops.h"
#include "model/mixer_registry.h"

namespace linea {

Block::Block(ParameterSet& params, const std::string& name, const ModelConfig& config, int64_t layer,
             const TensorParallel& tp, const LayerRouting* routing)
    : tp_(tp),
      attn_norm_(params, name + ".attn_norm", config.d_model, config.norm_eps),
      mixer_(mixer_family(config.layer_mixers.at(static_cast<size_t>(layer)))
                 .make_layer(params, name + ".mixer", config.d_model, config.norm_eps, config.layer_config(layer), tp,
                             {layer, config.layers, routing})) {
  if (config.mlp) {
    mlp_norm_.emplace(params, name + ".mlp_norm", config.d_model, config.norm_eps);
    mlp_.emplace(params, name + ".mlp", config.d_model, config.mlp_hidden, tp);
  }
}

void Block::init(Rng& rng, double std) {
  attn_norm_.init();
  mixer_->init(rng, std);
  if (mlp_) {
    mlp_norm_->init();
    mlp_->init(rng, std);
  }
}

// Σ_TP: the sum over the tensor-parallel group of each rank's term (nothing without TP).
Tensor Block::forward(StepContext& ctx, const Tensor& x) { return sum(forward_deferred(ctx, {x, Tensor()})); }

Block::Output Block::forward_deferred(StepContext& ctx, const Output& in) {
  // h = x + Σ_TP mixer(attn_norm(x)),  out = h + Σ_TP mlp(mlp_norm(h)); x = in.term + in.residual
  // and attn_norm(x) in one pass.
  x_ = in.term;
  const Tensor normed = in.residual.defined() ? attn_norm_.forward_residual(ctx, in.term, in.residual, in.term)
                                              : attn_norm_.forward(ctx, in.term);
  return finish(ctx, x_, mixer_->forward(ctx, normed));
}

Tensor Block::sum(const Output& out) {
  if (out.residual.defined()) ops::add_inplace(out.term, out.residual);
  return out.term;
}

Tensor Block::forward_continuing(StepContext& ctx, const Tensor& x, MixerState& state) {
  x_ = x;
  return sum(finish(ctx, x, mixer_->forward_continuing(ctx, attn_norm_.forward(ctx, x), state)));
}

Block::Output Block::finish(StepContext& ctx, const Tensor& x, Tensor mixer_out) {
  h_ = mixer_out;
  tp_.all_reduce_sum(h_);
  if (!mlp_) return {h_, x};
  // h = h + x and mlp_norm(h) in one pass
  Tensor out = mlp_->forward(ctx, mlp_norm_->forward_residual(ctx, h_, x, h_));
  tp_.all_reduce_sum(out);
  return {out, h_};
}

void Block::backward(StepContext& ctx, const Tensor& dout, Tensor dx) {
  const Shape shape = dout.shape();
  // ∂L/∂h = dout + mlp_normᵀ(Σ_TP mlpᵀ(dout)), with mlp_norm(h) recomputed (dout without MLP). It
  // is held in dx, so that the MLP half's temporaries can go before the mixer half makes its own.
  Tensor dh = dx;  // a second handle on dx
  if (mlp_) {
    const Tensor mlp_in = mlp_norm_->forward(ctx, h_);
    Tensor dmlp_in = ctx.temporary(shape);
    mlp_->backward(ctx, mlp_in, dout, dmlp_in);
    tp_.all_reduce_sum(dmlp_in);
    mlp_norm_->backward(h_, dmlp_in, dh, /*residual=*/dout);
  } else {
    dh.copy_from(dout);
  }
  ctx.scratch.reset();
  // ∂L/∂x = dh + attn_normᵀ(Σ_TP mixerᵀ(dh)), with attn_norm(x) recomputed
  const Tensor mixer_in = attn_norm_.forward(ctx, x_);
  Tensor dmixer_in = ctx.temporary(shape);
  mixer_->backward(ctx, mixer_in, dh, dmixer_in);
  tp_.all_reduce_sum(dmixer_in);
  attn_norm_.backward(x_, dmixer_in, dx, /*residual=*/dh);  // dh is dx: dx += the norm's gradient
}

}  // namespace linea
