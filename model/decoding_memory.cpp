#include "model/decoding_memory.h"

#include <algorithm>
#include <cstdio>

#include "model/mixer_registry.h"

namespace linea {

double DecodingMemory::values_after(int64_t tokens) const {
  double total = 0;
  for (const Mixer& m : mixers) {
    const int64_t kept = m.max_tokens > 0 ? std::min(tokens, m.max_tokens) : tokens;
    total += m.per_sequence + m.per_token * double(kept);
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
    if (it == memory.mixers.end()) it = memory.mixers.insert(memory.mixers.end(), {name, 0, 0, 0, m.max_tokens});
    it->layers += 1;
    it->per_sequence += m.per_sequence;
    it->per_token += m.per_token;
  }
  return memory;
}

std::string format_decoding_memory(const ModelConfig&, const DecodingMemory& memory) {
  std::string out = "decoding state per sequence (bf16 bytes; f32, the CPU path's, is twice):\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-10s %6s %16s %16s %12s\n", "mixer", "layers", "fixed", "per token",
                "tokens kept");
  out += line;
  const auto mib = [](double values) { return values * 2.0 / (1024.0 * 1024.0); };
  for (const DecodingMemory::Mixer& m : memory.mixers) {
    char per_token[32] = "-";
    if (m.per_token > 0) std::snprintf(per_token, sizeof per_token, "%.1f KiB", m.per_token * 2.0 / 1024.0);
    const std::string kept = m.per_token == 0 ? "-" : m.max_tokens > 0 ? std::to_string(m.max_tokens) : "all";
    std::snprintf(line, sizeof line, "  %-10s %6lld %12.3f MiB %16s %12s\n", m.name.c_str(),
                  static_cast<long long>(m.layers), mib(m.per_sequence), per_token, kept.c_str());
    out += line;
  }
  out += "  total per sequence at context";
  for (int64_t tokens : {2048, 4096, 32768}) {
    std::snprintf(line, sizeof line, "  %lld: %.2f MiB", static_cast<long long>(tokens),
                  mib(memory.values_after(tokens)));
    out += line;
  }
  return out + "\n";
}

}  // namespace linea
