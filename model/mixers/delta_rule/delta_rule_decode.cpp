// DeltaRuleLayer's decoding path: the layer's forward with the delta rule continuing each
// sequence's state S (h0 → ht) and the short convs continuing their input histories. A decoding
// step (one token per sequence) takes the recurrent form, S_t = S' + k_t uᵀ per token; a prefill
// the chunked forward.
#include <stdexcept>

#include "model/mixers/delta_rule/delta_rule_layer.h"

namespace linea {

std::unique_ptr<MixerState> DeltaRuleLayer::start_state(int64_t sequences) const {
  if (routing_.kind != RoutingKind::none) {
    throw std::invalid_argument(
        "model.routing.kind: decoding a model with cross-layer routing is not supported yet (train and evaluate it by "
        "validation loss, or decode an unrouted model)");
  }
  auto state = std::make_unique<DeltaRuleDecodeState>();
  state->h = Tensor::zeros({sequences, heads_, config_.d_k, config_.d_v}, output_.compute_dtype());
  if (q_conv_) {
    state->q_conv = q_conv_->start_history(sequences);
    state->k_conv = k_conv_->start_history(sequences);
    state->v_conv = v_conv_->start_history(sequences);
  }
  return state;
}

void DeltaRuleDecodeState::advance(StepContext& ctx, const ops::DeltaRuleSpec& spec, ops::DeltaRuleInputs in,
                                   Tensor o) {
  in.h0 = h;
  Tensor ht = Tensor::empty(h.shape(), h.dtype());
  const auto impl = one_token_each(ctx.seqs) ? ops::DeltaRuleImpl::recurrent : ops::DeltaRuleImpl::chunked;
  ops::delta_rule_forward(impl, spec, ctx.seqs, in, o, ht);
  h = ht;
}

}  // namespace linea
