#include "worker/block.h"

#include "kernels/ops.h"
#include "worker/attention_layer.h"
#include "worker/delta_rule_layer.h"

namespace linea {

namespace {
std::unique_ptr<Mixer> make_mixer(ParameterSet& params, const std::string& name, const ModelConfig& config,
                                  int64_t layer) {
  if (config.is_attention_layer(layer)) {
    return std::make_unique<AttentionLayer>(params, name, config.d_model, config.attention);
  }
  return std::make_unique<DeltaRuleLayer>(params, name, config.d_model, config.mixer, config.linear, config.norm_eps);
}
}  // namespace

Block::Block(ParameterSet& params, const std::string& name, const ModelConfig& config, int64_t layer)
    : attn_norm_(params, name + ".attn_norm", config.d_model, config.norm_eps),
      mixer_(make_mixer(params, name + ".mixer", config, layer)),
      mlp_norm_(params, name + ".mlp_norm", config.d_model, config.norm_eps),
      mlp_(params, name + ".mlp", config.d_model, config.mlp_hidden) {}

void Block::init(Rng& rng, double std) {
  attn_norm_.init();
  mixer_->init(rng, std);
  mlp_norm_.init();
  mlp_.init(rng, std);
}

Tensor Block::forward(StepContext& ctx, const Tensor& x) {
  Tensor h = mixer_->forward(ctx, attn_norm_.forward(ctx, x));
  ops::add_inplace(h, x);
  Tensor out = mlp_.forward(ctx, mlp_norm_.forward(ctx, h));
  ops::add_inplace(out, h);
  return out;
}

void Block::backward(StepContext& ctx, const Tensor& dout, Tensor dx) {
  const Shape shape = dout.shape();
  // ∂L/∂h = dout + mlp_normᵀ(mlpᵀ(dout))
  Tensor dmlp_in = ctx.temporary(shape);
  mlp_.backward(ctx, dout, dmlp_in);
  Tensor dh = ctx.temporary(shape);
  mlp_norm_.backward(dmlp_in, dh);
  ops::add_inplace(dh, dout);
  // ∂L/∂x = dh + attn_normᵀ(mixerᵀ(dh))
  Tensor dmixer_in = ctx.temporary(shape);
  mixer_->backward(ctx, dh, dmixer_in);
  attn_norm_.backward(dmixer_in, dx);
  ops::add_inplace(dx, dh);
}

}  // namespace linea
