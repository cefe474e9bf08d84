// AttentionLayer: causal softmax attention with RoPE, GQA and an optional sliding window
// (fla's Attention in hybrid models, reference/mixers.md §4.3):
//   q = RoPE(W_q x), k = RoPE(W_k x), v = W_v x    (W_q: [Hq·Dh, D], W_k, W_v: [Hkv·Dh, D], no bias)
//   o = attention(q, k, v; scale 1/√Dh, window),  y = W_o o   (W_o: [D, Hq·Dh])
// RoPE positions restart in every document; attention never crosses a document boundary.
// forward saves the rotated q, k, v, the output and its log-sum-exp (not x: backward takes it again);
// backward rotates dq, dk back.
// Under tensor parallelism a rank holds query heads tp.split_evenly(Hq) and kv heads
// tp.split_evenly(Hkv) (so each query head's kv head is local): W_q, W_k, W_v split on their
// outputs, W_o on its inputs; y and dx are this rank's terms of sums over the group.
#pragma once
#include <memory>
#include <string>

#include "kernels/ops.h"
#include "model/linear.h"
#include "model/mixer.h"
#include "model/mixers/attention/attention.h"
#include "model/mixers/attention/attention_config.h"
#include "model/tensor_parallel.h"

namespace linea {

class AttentionLayer final : public Mixer {
 public:
  AttentionLayer(ParameterSet& params, const std::string& name, int64_t d_model, const AttentionConfig& config,
                 const TensorParallel& tp = {});

  void init(Rng& rng, double std) override;
  Tensor forward(StepContext& ctx, const Tensor& x) override;
  void backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) override;
  // Decoding (attention_decode.cpp): a KV cache per sequence (the last window − 1 tokens' for a
  // sliding window), the rotated keys and values of the tokens seen.
  std::unique_ptr<MixerState> start_state(int64_t sequences) const override;
  Tensor forward_continuing(StepContext& ctx, const Tensor& x, MixerState& state) override;

 private:
  struct DecodeState;
  AttentionConfig config_;
  HeadShard q_heads_, kv_heads_;  // held by this rank
  ops::AttentionShape shape_;
  Linear q_proj_, k_proj_, v_proj_, o_proj_;
  Tensor q_, k_, v_, out_, lse_;
};

}  // namespace linea
