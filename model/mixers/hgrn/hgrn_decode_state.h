// HgrnLayer's decoding state (hgrn_decode.cpp): the recurrence's h per sequence and channel, a
// fixed size whatever the number of tokens seen, on the layer's device (f32 beside bf16 weights).
#pragma once
#include "model/mixer.h"
#include "model/mixers/hgrn/hgrn.h"

namespace linea {

struct HgrnDecodeState final : MixerState {
  Tensor h;  // [S, channels]

  size_t bytes() const override { return h.nbytes(); }
  // o over ctx.seqs continuing h, then h ← the final states: the chunked scan on a prefill, the
  // recurrent one-token update h_t = exp(g_t) ⊙ h_{t−1} + x_t (in place) on a decoding step.
  void advance(StepContext& ctx, ops::HgrnInputs in, Tensor o);
};

}  // namespace linea
