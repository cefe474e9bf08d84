// Rwkv6Layer: RWKV-6's time mixing (reference/mixers.md §1.10; fla's RWKV6Attention), H heads of
// key width K and value width V:
//
//   δ = x_{t−1} − x_t                                   (token shift, 0 before a document's start)
//   x̄ = x + δ ⊙ μ                                       (μ: [D])
//   m_i = W_i2 tanh(W_i1 x̄) + b_i,  x_i = x + δ ⊙ m_i    (i = r, w, k, v, g; LoRAs of rank proj_rank)
//   r, k = W_r x_r, W_k x_k  (D → H·K);  v, g = W_v x_v, W_g x_g  (D → H·V)
//   w = −exp(W_w2 tanh(W_w1 x_w) + b_w)                  (log decay per key channel, LoRA decay_rank)
//   o = gla(r, k, v, w, bonus u), read before write, scale 1
//   out = W_o (GroupNorm_H(o) · γ + β) ⊙ silu(g)
//
// fla's x_proj (LerpLinear D → 5·proj_rank, tanh, Linear 5·proj_rank → D read block by block, and
// x_bias [5, D]) is the five LoRAs x_lora.<i> here, with the same parameters. Under tensor
// parallelism a rank holds heads tp.shard_heads(H): the rows of r, k, v, g, w's second factor and
// bias, their bonus rows and GroupNorm channels, the columns of o_proj; the token-shift lerps and
// w's first factor are whole on every rank, with partial gradients. Init: projections N(0, std),
// μ, the lerps' and w's biases, u = 0 (fla's), GroupNorm γ = 1, β = 0. In a bf16 step (CUDA) the
// decay w and the bonus u are f32 for the op: w from an f32 copy of its logits, u the f32 master
// bonus (its gradient into the master gradient); dw is rounded back to bf16 (model/wide_gates.h).
#pragma once
#include <array>
#include <memory>
#include <optional>
#include <string>

#include "model/input_history.h"
#include "model/linear.h"
#include "model/low_rank_linear.h"
#include "model/mixer.h"
#include "model/mixers/gla/gla.h"
#include "model/mixers/gla/gla_configs.h"
#include "model/mixers/gla/gla_decode_state.h"
#include "model/tensor_parallel.h"

namespace linea {

class Rwkv6Layer final : public RunMixer<GlaDecodeState> {
 public:
  Rwkv6Layer(ParameterSet& params, const std::string& name, int64_t d_model, const Rwkv6Config& config, double norm_eps,
             const TensorParallel& tp);

  void init(Rng& rng, double std) override;
  void backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) override;
  // Decoding (gla_decode.cpp): the op's state and the layer's input histories (GlaDecodeState).
  std::unique_ptr<MixerState> start_state(int64_t sequences) const override;

 private:
  // forward from zero states (state null: training) or continuing `state`.
  Tensor run(StepContext& ctx, const Tensor& x, GlaDecodeState* state) override;
  static constexpr int kLerps = 5;  // r, w, k, v, g
  // The shift δ and x̄ = x + δ ⊙ μ; and the five inputs x_i = x + δ ⊙ m_i of the kept m_i; in
  // ctx.scratch.
  struct Lerps {
    Tensor delta, mixed;
    std::array<Tensor, kLerps> inputs;
  };
  Lerps shift(StepContext& ctx, const Tensor& x, InputHistory* history = nullptr) const;
  void lerp_inputs(StepContext& ctx, const Tensor& x, Lerps& l) const;
  // The op's operands from the kept projections (w = −exp(·)), in ctx.scratch; w and u in
  // ctx.statistics_dtype().
  ops::GlaInputs operands(StepContext& ctx) const;
  // GroupNorm(o) and its statistics, in ctx.scratch.
  struct Normed {
    Tensor y, mean, rstd;
  };
  Normed group_norm(StepContext& ctx) const;

  int64_t d_k_, d_v_;
  double norm_eps_;
  bool recompute_;  // the config's: no saved buffer
  ops::GlaSpec spec_;
  HeadShard shard_;
  int64_t heads_, key_width_, value_width_;  // of this rank
  Parameter* mu_;
  std::array<std::optional<LowRankLinear>, kLerps> lerp_lora_;
  Linear r_proj_, k_proj_, v_proj_, g_proj_;
  LowRankLinear w_proj_;
  Parameter* bonus_;
  Parameter *norm_weight_, *norm_bias_;
  Linear o_proj_;

  std::array<Tensor, kLerps> m_;  // kept by forward: the data-dependent lerp weights
  Tensor r_, w_, k_, v_, g_, o_;  // the projections (w_: before −exp), the op's output
  Tensor saved_;                  // what the op saved for its backward (ops::gla_saved_bytes: none yet)
};

}  // namespace linea
