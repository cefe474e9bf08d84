// HgrnLayer's decoding path: the layer's forward (run) with the recurrence continuing each
// sequence's state (h0 → ht).
#include "model/mixers/hgrn/hgrn_layer.h"

namespace linea {

std::unique_ptr<MixerState> HgrnLayer::start_state(int64_t sequences) const {
  auto state = std::make_unique<HgrnDecodeState>();
  state->h = Tensor::zeros({sequences, channels_.size}, output_.compute_dtype());
  return state;
}

void HgrnDecodeState::advance(const SeqLayout& seqs, ops::HgrnInputs in, Tensor o) {
  in.h0 = h;
  Tensor ht = Tensor::empty(h.shape(), h.dtype());
  ops::hgrn_forward(one_token_each(seqs) ? ops::HgrnImpl::recurrent : ops::HgrnImpl::chunked, seqs, in, o, ht);
  h = ht;
}

}  // namespace linea
