#include "model/decoding_memory.h"

#include <algorithm>
#include <cstdio>

#include "model/mixer_registry.h"

namespace linea {

namespace {
// Bytes of a recurrent-state value: f32 under bf16 compute (model/mixer.h zero_state).
double state_value_bytes(DType compute) { return compute == DType::bf16 ? 4.0 : double(dtype_size(compute)); }
}  // namespace

double DecodingMemory::Mixer::fixed_bytes(DType compute) const {
  return state * state_value_bytes(compute) + inputs * double(dtype_size(compute));
}

double DecodingMemory::Mixer::token_bytes(DType compute) const { return per_token * double(dtype_size(compute)); }

double DecodingMemory::bytes_after(int64_t tokens, DType compute) const {
  double total = 0;
  for (const Mixer& m : mixers) {
    const int64_t kept = m.max_tokens > 0 ? std::min(tokens, m.max_tokens) : tokens;
    total += m.fixed_bytes(compute) + m.token_bytes(compute) * double(kept);
  }
  return total;
}

DecodingMemory decoding_memory(const ModelConfig& given) {
  ModelConfig config = given;
  config.resolve();
  DecodingMemory memory;
  for (int64_t layer = 0; layer < config.layers; ++layer) {
    const std::string& name = config.layer_mixers.at(static_cast<size_t>(layer));
    const MixerFamily::DecodingMemory m =
        mixer_family(name).decoding_memory(config.layer_config(layer), config.d_model);
    auto it = std::find_if(memory.mixers.begin(), memory.mixers.end(), [&](const auto& e) { return e.name == name; });
    if (it == memory.mixers.end()) {
      it = memory.mixers.insert(memory.mixers.end(), DecodingMemory::Mixer{name, 0, 0, 0, 0, m.max_tokens});
    }
    it->layers += 1;
    it->state += m.state;
    it->inputs += m.inputs;
    it->per_token += m.per_token;
  }
  return memory;
}

std::string format_decoding_memory(const DecodingMemory& memory) {
  std::string out =
      "decoding state per sequence, as the decoders hold it (recurrent states in f32; conv and shift\n"
      "inputs and KV caches in the run's dtype): a bf16 run (the GPU's) / an f32 run (the CPU's)\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-10s %6s %24s %24s %12s\n", "mixer", "layers", "fixed", "per token",
                "tokens kept");
  out += line;
  const auto mib = [](double bytes) { return bytes / (1024.0 * 1024.0); };
  for (const DecodingMemory::Mixer& m : memory.mixers) {
    char fixed[48] = "-", per_token[48] = "-";
    if (m.state + m.inputs > 0) {
      std::snprintf(fixed, sizeof fixed, "%.3f / %.3f MiB", mib(m.fixed_bytes(DType::bf16)),
                    mib(m.fixed_bytes(DType::f32)));
    }
    if (m.per_token > 0) {
      std::snprintf(per_token, sizeof per_token, "%.1f / %.1f KiB", m.token_bytes(DType::bf16) / 1024.0,
                    m.token_bytes(DType::f32) / 1024.0);
    }
    const std::string kept = m.per_token == 0 ? "-" : m.max_tokens > 0 ? std::to_string(m.max_tokens) : "all";
    std::snprintf(line, sizeof line, "  %-10s %6lld %24s %24s %12s\n", m.name.c_str(), static_cast<long long>(m.layers),
                  fixed, per_token, kept.c_str());
    out += line;
  }
  out += "  total per sequence at context";
  for (int64_t tokens : {2048, 4096, 32768}) {
    std::snprintf(line, sizeof line, "  %lld: %.2f / %.2f MiB", static_cast<long long>(tokens),
                  mib(memory.bytes_after(tokens, DType::bf16)), mib(memory.bytes_after(tokens, DType::f32)));
    out += line;
  }
  return out + "\n";
}

}  // namespace linea
