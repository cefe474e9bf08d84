// The decoding memory of a model config (`linea params --inference`): what the layers' decoding
// states (model/mixer.h's MixerState, one per layer and sequence) hold, from each family's
// MixerFamily::decoding_memory: values fixed per sequence (recurrent states; conv and shift
// inputs) and per token seen (KV caches, capped by sliding windows), summed by mixer, and their
// bytes as the decoders hold them: recurrent states in f32 when the run computes in bf16 (else
// in its dtype), inputs and KV caches in the compute dtype.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "model/model_config.h"

namespace linea {

struct DecodingMemory {
  struct Mixer {
    std::string name;
    int64_t layers = 0;
    double state = 0;        // recurrent-state values, all its layers together
    double inputs = 0;       // conv / token-shift input values, all its layers together
    double per_token = 0;    // KV values per token seen, all its layers together
    int64_t max_tokens = 0;  // tokens a KV cache keeps at most (0: all)

    // Bytes of one sequence's fixed part and per token kept, for a run computing in `compute`.
    double fixed_bytes(DType compute) const;
    double token_bytes(DType compute) const;
  };
  std::vector<Mixer> mixers;  // in the order of first use in the stack

  // Bytes held by one sequence after `tokens` tokens, for a run computing in `compute`.
  double bytes_after(int64_t tokens, DType compute) const;
};

DecodingMemory decoding_memory(const ModelConfig& config);

// The table: per mixer, layers, fixed and per-token bytes for a bf16 run (the GPU's) and an f32 run
// (the CPU's), and the totals per sequence at a few context lengths.
std::string format_decoding_memory(const DecodingMemory& memory);

}  // namespace linea
