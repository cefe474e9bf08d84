// Decoder: token-by-token decoding of a batch of S sequences with a linea Model: prefill runs the
// prompts through the chunked forward from empty states (Model::start_states), then each step
// feeds one token per sequence through the layers' one-token updates, carrying each layer's
// MixerState (recurrent state, short-conv inputs, KV cache). The logits of every step equal those
// of one full forward over the whole sequences (tests/unit/inference/test_decoder.cpp).
// Sequences never see each other (they are packed as separate documents). On the model's device
// (CPU or CUDA).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "inference/language_model.h"
#include "model/model.h"

namespace linea::inference {

class Decoder {
 public:
  Decoder(Model& model, int64_t sequences);

  int64_t sequences() const { return sequences_; }
  // The prompts (one per sequence, each non-empty) from empty states: the logits at each prompt's
  // last token, [S, vocab] (the model's dtype, on the host).
  Tensor prefill(const std::vector<TokenIds>& prompts);
  // One token per sequence after the prefill: the logits after it, [S, vocab].
  Tensor step(const TokenIds& tokens);
  // Bytes the layers' states hold now, over all sequences.
  size_t state_bytes() const;

 private:
  Model& model_;
  int64_t sequences_;
  Model::DecodingState state_;
  bool prefilled_ = false;
};

}  // namespace linea::inference
