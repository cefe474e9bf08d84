// The attention family in the mixer registry: one mixer, "attention", configured from
// [model.attention], built as AttentionLayer.
#include <memory>
#include <string>
#include <vector>

#include "model/mixer_family.h"
#include "model/mixers/attention/attention_config.h"
#include "model/mixers/attention/attention_layer.h"

namespace linea {

namespace {

// The mean number of keys a query sees in a causal sequence of seq_len tokens with this window
// (0 = unlimited): tokens t < w see t + 1 keys, the rest w.
double mean_causal_context(int64_t seq_len, int64_t window) {
  const double full = 0.5 * double(seq_len + 1);
  if (window <= 0 || window >= seq_len) return full;
  const double w = double(window);
  return (w * (w + 1) / 2 + w * double(seq_len - window)) / double(seq_len);
}

class AttentionFamily final : public MixerFamily {
 public:
  std::string_view name() const override { return "attention"; }
  const std::vector<std::string>& mixers() const override {
    static const std::vector<std::string> names = {"attention"};
    return names;
  }
  std::string_view default_mixer() const override { return "attention"; }
  std::string_view shared_section() const override { return "attention"; }
  std::string_view parameter_group() const override { return "attention"; }

  std::unique_ptr<MixerConfig> make_config(std::string_view, std::string section) const override {
    return std::make_unique<AttentionConfig>(std::move(section));
  }
  std::unique_ptr<Mixer> make_layer(ParameterSet& params, const std::string& prefix, int64_t d_model, double,
                                    const MixerConfig& config, const TensorParallel& tp,
                                    const LayerPlace&) const override {
    return std::make_unique<AttentionLayer>(params, prefix, d_model, config_as<AttentionConfig>(config), tp);
  }

  // The log-sum-exp of every query head stays f32.
  double wide_values_per_token(const MixerConfig& config) const override {
    return double(config_as<AttentionConfig>(config).heads);
  }
  double cuda_workspace_bytes(const MixerConfig&, int64_t) const override { return 0; }

  // The KV cache: a key and a value per kv head and token, window − 1 tokens with a window.
  DecodingMemory decoding_memory(const MixerConfig& config, int64_t) const override {
    const AttentionConfig& c = config_as<AttentionConfig>(config);
    return {0, 0, 2.0 * double(c.kv_heads * c.head_dim), c.window > 0 ? c.window - 1 : 0};
  }

  // QKᵀ and PV forward (4 FLOPs per key and channel), twice that backward, per query head.
  double mixing_flops_per_token(const MixerConfig& config, int64_t seq_len) const override {
    const AttentionConfig& c = config_as<AttentionConfig>(config);
    return double(c.heads) * 12.0 * mean_causal_context(seq_len, c.window) * double(c.head_dim);
  }
};

}  // namespace

const MixerFamily& attention_family() {
  static const AttentionFamily family;
  return family;
}

}  // namespace linea
