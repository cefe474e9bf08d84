// The decoding memory of a model config (`linea params --inference`): what the layers' decoding
// states (model/mixer.h's MixerState, one per layer and sequence) hold, from each family's
// MixerFamily::decoding_memory: values fixed per sequence (recurrent states, conv and shift
// inputs) and per token seen (KV caches, capped by sliding windows), summed by mixer.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace linea {

struct DecodingMemory {
  struct Mixer {
    std::string name;
    int64_t layers = 0;
    double per_sequence = 0;  // values, all its layers together
    double per_token = 0;     // values per token seen, all its layers together
    int64_t max_tokens = 0;   // tokens a KV cache keeps at most (0: all)
  };
  std::vector<Mixer> mixers;  // in the order of first use in the stack

  // Values held by one sequence after `tokens` tokens.
  double values_after(int64_t tokens) const;
};

DecodingMemory decoding_memory(const ModelConfig& config);

// The table: per mixer, layers, per-sequence and per-token bytes, and the total per sequence at a
// few context lengths, at `bytes_per_value` (4: f32, the CPU decoding path; 2: bf16).
std::string format_decoding_memory(const ModelConfig& config, const DecodingMemory& memory);

}  // namespace linea
