// DeltaRuleLayer's decoding path: the layer's forward with the delta rule continuing each
// sequence's state S (h0 → ht) and the short convs continuing their input histories. A decoding
// step (one token per sequence) takes the recurrent form, S_t = S' + k_t uᵀ per token, updating S in
// place; a prefill the chunked forward, its final states through ctx.scratch. On the layer's device
// (CUDA: S in f32 whatever the step's dtype).
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
  state->h = zero_state({sequences, heads_, config_.d_k, config_.d_v}, q_proj_.weight().compute);
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
  if (one_token_each(ctx.seqs)) {
    ops::delta_rule_forward(ops::DeltaRuleImpl::recurrent, spec, ctx.seqs, in, o, h);
  } else {
    Tensor ht = ctx.scratch.alloc(h.shape(), h.dtype());
    ops::delta_rule_forward(ops::DeltaRuleImpl::chunked, spec, ctx.seqs, in, o, ht);
    h.copy_from(ht);
  }
}

}  // namespace linea
