// DeltaRuleLayer's decoding state (delta_rule_decode.cpp): per sequence the delta rule's state
// S ∈ R^{H×K×V} and the last conv − 1 inputs of each of the q, k, v convs: a fixed size whatever
// the number of tokens seen.
#pragma once
#include "model/input_history.h"
#include "model/mixer.h"
#include "model/mixers/delta_rule/delta_rule.h"

namespace linea {

struct DeltaRuleDecodeState final : MixerState {
  Tensor h;  // [S, H, K, V]
  InputHistory q_conv, k_conv, v_conv;

  size_t bytes() const override { return h.nbytes() + q_conv.bytes() + k_conv.bytes() + v_conv.bytes(); }
  // o over ctx.seqs continuing h, then h ← the final states: the chunked forward on a prefill, the
  // recurrent one-token update on a decoding step.
  void advance(StepContext& ctx, const ops::DeltaRuleSpec& spec, ops::DeltaRuleInputs in, Tensor o);
};

}  // namespace linea
