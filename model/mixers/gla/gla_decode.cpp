// Decoding paths of the gated-linear-attention family's layers: each layer's forward (run) with
// the op continuing each sequence's state (h0 → ht; a decoding step takes the recurrent form
// S_t = Diag(exp(g_t)) S_{t−1} + k_t v_tᵀ in place, a prefill the chunked forward) and its convs or
// token shift continuing their input histories. RetNet's RoPE reads ctx.positions, which a continuing
// forward gives as positions in the whole sequences (Model::logits_continuing).
#include "model/mixers/gla/gla_decode_state.h"
#include "model/mixers/gla/gla_layer.h"
#include "model/mixers/gla/hgrn2_layer.h"
#include "model/mixers/gla/mamba2_layer.h"
#include "model/mixers/gla/rwkv6_layer.h"
#include "model/short_conv.h"

namespace linea {

GlaDecodeState::GlaDecodeState(int64_t sequences, int64_t heads, int64_t d_k, int64_t d_v, const Tensor& weights)
    : h(zero_state({sequences, heads, d_k, d_v}, weights)) {}

size_t GlaDecodeState::bytes() const {
  size_t total = h.nbytes();
  for (const InputHistory& history : histories) total += history.bytes();
  return total;
}

Tensor gla_forward_continuing(StepContext& ctx, const ops::GlaSpec& spec, ops::GlaInputs in, Tensor o,
                              GlaDecodeState* state, bool recompute) {
  if (!state) {
    const size_t bytes = ctx.backward_follows && !recompute ? ops::gla_saved_bytes(spec, ctx.seqs, in) : 0;
    const Tensor saved = bytes ? ctx.activations.alloc({static_cast<int64_t>((bytes + 1) / 2)}, DType::bf16) : Tensor();
    ops::gla_forward(ops::GlaImpl::chunked, spec, ctx.seqs, in, o, Tensor(), saved);
    return saved;
  }
  in.h0 = state->h;
  if (one_token_each(ctx.seqs)) {
    ops::gla_forward(ops::GlaImpl::recurrent, spec, ctx.seqs, in, o, state->h);
  } else {
    Tensor ht = ctx.scratch.alloc(state->h.shape(), state->h.dtype());
    ops::gla_forward(ops::GlaImpl::chunked, spec, ctx.seqs, in, o, ht);
    state->h.copy_from(ht);
  }
  return Tensor();
}

std::unique_ptr<MixerState> GlaLayer::start_state(int64_t sequences) const {
  auto state = std::make_unique<GlaDecodeState>(sequences, heads_, shape_.d_k, shape_.d_v, q_proj_.weight().compute);
  if (q_conv_) {
    for (const ShortConv* conv : {&*q_conv_, &*k_conv_, &*v_conv_})
      state->histories.push_back(conv->start_history(sequences));
  }
  return state;
}

std::unique_ptr<MixerState> Hgrn2Layer::start_state(int64_t sequences) const {
  return std::make_unique<GlaDecodeState>(sequences, heads_, d_k_, d_v_, q_proj_.weight().compute);
}

std::unique_ptr<MixerState> Mamba2Layer::start_state(int64_t sequences) const {
  auto state = std::make_unique<GlaDecodeState>(sequences, heads_, config_.state_size, config_.head_dim, D_->compute);
  for (const ShortConv* conv : {&x_conv_, &B_conv_, &C_conv_})
    state->histories.push_back(conv->start_history(sequences));
  return state;
}

std::unique_ptr<MixerState> Rwkv6Layer::start_state(int64_t sequences) const {
  auto state = std::make_unique<GlaDecodeState>(sequences, heads_, d_k_, d_v_, mu_->compute);
  state->histories.emplace_back(sequences, 1, mu_->compute.dim(0), mu_->compute.dtype(),
                                mu_->compute.device());  // the previous x
  return state;
}

}  // namespace linea
