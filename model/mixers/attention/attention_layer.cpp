#include "model/mixers/attention/attention_layer.h"

#include <cmath>

#include "model/head_projection.h"

namespace linea {

AttentionLayer::AttentionLayer(ParameterSet& params, const std::string& name, int64_t d_model,
                               const AttentionConfig& config, const TensorParallel& tp)
    : config_(config),
      q_heads_(tp.shard_heads(config.heads, config.section + ".heads")),
      kv_heads_(tp.shard_heads(config.kv_heads, config.section + ".kv_heads")),
      shape_{q_heads_.size(),
             kv_heads_.size(),
             config.head_dim,
             config.window,
             1.0 / std::sqrt(double(config.head_dim)),
             config.backend,
             config.cudnn_autotune},
      q_proj_(into_heads(params, name + ".q_proj", d_model, config.heads, config.head_dim, q_heads_)),
      k_proj_(into_heads(params, name + ".k_proj", d_model, config.kv_heads, config.head_dim, kv_heads_)),
      v_proj_(into_heads(params, name + ".v_proj", d_model, config.kv_heads, config.head_dim, kv_heads_)),
      o_proj_(out_of_heads(params, name + ".o_proj", config.heads, config.head_dim, d_model, q_heads_)) {}

void AttentionLayer::init(Rng& rng, double std) {
  q_proj_.init(rng, std);
  k_proj_.init(rng, std);
  v_proj_.init(rng, std);
  o_proj_.init(rng, std);
}

Tensor AttentionLayer::forward(StepContext& ctx, const Tensor& x) {
  q_ = q_proj_.forward(ctx, x);
  k_ = k_proj_.forward(ctx, x);
  v_ = v_proj_.forward(ctx, x);
  ops::rope_apply(q_, ctx.positions, shape_.q_heads, config_.rope_theta, /*inverse=*/false);
  ops::rope_apply(k_, ctx.positions, shape_.kv_heads, config_.rope_theta, /*inverse=*/false);
  out_ = ctx.activation({x.dim(0), shape_.q_heads * config_.head_dim});
  lse_ = ctx.statistics({x.dim(0), shape_.q_heads});
  ops::attention_forward(out_, lse_, q_, k_, v_, shape_, ctx.seqs);
  return o_proj_.forward(ctx, out_);
}

void AttentionLayer::backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) {
  const int64_t n = dy.dim(0);
  Tensor dout = ctx.temporary({n, shape_.q_heads * config_.head_dim});
  o_proj_.backward(out_, dy, dout, false);
  Tensor dq = ctx.temporary(q_.shape());
  Tensor dk = ctx.temporary(k_.shape());
  Tensor dv = ctx.temporary(v_.shape());
  ops::attention_backward(dq, dk, dv, dout, q_, k_, v_, out_, lse_, shape_, ctx.seqs);
  // RoPE is a rotation by θ(position): its transpose is the rotation by −θ.
  ops::rope_apply(dq, ctx.positions, shape_.q_heads, config_.rope_theta, /*inverse=*/true);
  ops::rope_apply(dk, ctx.positions, shape_.kv_heads, config_.rope_theta, /*inverse=*/true);
  q_proj_.backward(x, dq, dx, false);
  k_proj_.backward(x, dk, dx, true);
  v_proj_.backward(x, dv, dx, true);
}

}  // namespace linea
