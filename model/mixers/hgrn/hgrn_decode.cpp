// HgrnLayer's decoding path: the layer's forward (run) with the recurrence continuing each
// sequence's state (h0 → ht): a decoding step updates h in place through the recurrent form, a
// prefill runs the chunked scan with its final states through ctx.scratch. On the layer's device.
#include "model/mixers/hgrn/hgrn_layer.h"

namespace linea {

std::unique_ptr<MixerState> HgrnLayer::start_state(int64_t sequences) const {
  auto state = std::make_unique<HgrnDecodeState>();
  state->h = zero_state({sequences, channels_.size}, i_proj_.weight().compute);
  return state;
}

void HgrnDecodeState::advance(StepContext& ctx, ops::HgrnInputs in, Tensor o) {
  in.h0 = h;
  if (one_token_each(ctx.seqs)) {
    ops::hgrn_forward(ops::HgrnImpl::recurrent, ctx.seqs, in, o, h);
  } else {
    Tensor ht = ctx.scratch.alloc(h.shape(), h.dtype());
    ops::hgrn_forward(ops::HgrnImpl::chunked, ctx.seqs, in, o, ht);
    h.copy_from(ht);
  }
}

}  // namespace linea
