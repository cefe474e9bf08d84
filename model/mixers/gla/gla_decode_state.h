// The decoding state of the gated-linear-attention family's layers (GLA, RetNet, HGRN-2, Mamba-2,
// RWKV-6; gla_decode.cpp): per sequence the op's state S ∈ R^{H×K×V}, and the input histories of
// the layer's short convs (GLA's and RetNet's q, k, v when conv > 0; Mamba-2's x, B, C) or token
// shift (RWKV-6's previous x): a fixed size whatever the number of tokens seen, on the layer's
// device (S in f32 beside bf16 weights).
#pragma once
#include <memory>
#include <vector>

#include "model/input_history.h"
#include "model/mixer.h"
#include "model/mixers/gla/gla.h"

namespace linea {

struct GlaDecodeState final : MixerState {
  Tensor h;                             // [S, H, K, V]
  std::vector<InputHistory> histories;  // in the order the layer reads them

  // weights: one of the layer's compute weights (their device and dtype; model/mixer.h zero_state).
  GlaDecodeState(int64_t sequences, int64_t heads, int64_t d_k, int64_t d_v, const Tensor& weights);
  size_t bytes() const override;
};

// ops::gla_forward over ctx.seqs from zero states (state null: training), or continuing state->h
// and updating it: the chunked forward on a prefill (its final states through ctx.scratch), the
// recurrent one-token update in place on a decoding step. Returns the buffer the op saved its
// intermediates in for the backward (ops::gla_saved_bytes, from ctx.activations): only from zero
// states when a backward follows (ctx.backward_follows), the config does not `recompute` and the
// call saves something; else undefined. The layer passes it to ops::gla_backward.
Tensor gla_forward_continuing(StepContext& ctx, const ops::GlaSpec& spec, ops::GlaInputs in, Tensor o,
                              GlaDecodeState* state, bool recompute);

}  // namespace linea
