// The delta-rule family in the mixer registry: deltanet, gdn, kda and gdn2, configured from
// [model.<mixer>] or [model.linear], built as DeltaRuleLayer.
#include <memory>
#include <string>
#include <vector>

#include "model/mixer_family.h"
#include "model/mixers/delta_rule/delta_rule_config.h"
#include "model/mixers/delta_rule/delta_rule_layer.h"
#include "model/mixers/delta_rule/delta_rule_problem.h"

namespace linea {

namespace {

class DeltaRuleFamily final : public MixerFamily {
 public:
  std::string_view name() const override { return "delta_rule"; }

  const std::vector<std::string>& mixers() const override {
    static const std::vector<std::string> names = [] {
      std::vector<std::string> n;
      for (const DeltaRulePreset& p : delta_rule_presets()) n.emplace_back(p.name);
      return n;
    }();
    return names;
  }
  std::string_view default_mixer() const override { return "gdn"; }
  std::string_view shared_section() const override { return "linear"; }
  std::string_view parameter_group() const override { return "linear mixers"; }

  std::unique_ptr<MixerConfig> make_config(std::string_view mixer, std::string section) const override {
    return std::make_unique<DeltaRuleConfig>(mixer, std::move(section));
  }
  std::unique_ptr<Mixer> make_layer(ParameterSet& params, const std::string& prefix, int64_t d_model, double norm_eps,
                                    const MixerConfig& config, const TensorParallel& tp,
                                    const LayerPlace&) const override {
    return std::make_unique<DeltaRuleLayer>(params, prefix, d_model, config_as<DeltaRuleConfig>(config), norm_eps, tp);
  }

  // The decay gate's input W_a x or W_f x stays in the master dtype (f32): one value per head for a
  // scalar decay, one per key channel for a channel decay.
  // The state H·K·V and conv − 1 inputs of each of the q, k and v convs, per sequence.
  DecodingMemory decoding_memory(const MixerConfig& config, int64_t) const override {
    const DeltaRuleConfig& c = config_as<DeltaRuleConfig>(config);
    const double keys = double(c.heads * c.d_k), values = double(c.heads * c.d_v);
    return {keys * double(c.d_v) + (c.conv > 0 ? double(c.conv - 1) * (2 * keys + values) : 0.0)};
  }

  double wide_values_per_token(const MixerConfig& config) const override {
    const DeltaRuleConfig& c = config_as<DeltaRuleConfig>(config);
    return double(decay_width(c));
  }

  // The CUDA workspaces of backward (model/mixers/delta_rule/cuda/delta_rule.cu, Plan): f32 log
  // decays, 4 value- and 10 key-sized buffers, 2 chunk tiles and 2 chunk states per head.
  double cuda_workspace_bytes(const MixerConfig& config, int64_t tokens) const override {
    const DeltaRuleConfig& c = config_as<DeltaRuleConfig>(config);
    const double chunk = 64, chunks = double(tokens) / chunk, heads = double(c.heads);
    const double rows = double(tokens) * heads, keys = rows * double(c.d_k), values = rows * double(c.d_v);
    const double decays = double(tokens) * double(decay_width(c));
    const double tiles = chunks * heads * chunk * chunk, states = chunks * heads * double(c.d_k * c.d_v);
    return 4.0 * (decays + 4 * values + 10 * keys + 2 * tiles + 2 * states);
  }

  // Per head, the chunked algorithm (C = 64; reference/mixers.md §2.7), forward and backward.
  double mixing_flops_per_token(const MixerConfig& config, int64_t) const override {
    const DeltaRuleConfig& c = config_as<DeltaRuleConfig>(config);
    const double C = 64;
    const double dk = double(c.d_k), dv = double(c.d_v);
    return double(c.heads) * (22 * dk * dv + 24 * C * dk + 14 * C * dv + 13.0 / 3.0 * C * C);
  }

  const MixerProblemFormat* problem_format() const override { return &delta_rule_problem_format(); }

 private:
  // The log decays per token: none, one per head, or one per key channel.
  static int64_t decay_width(const DeltaRuleConfig& c) {
    switch (c.preset.decay) {
      case ops::DecayKind::none: return 0;
      case ops::DecayKind::scalar: return c.heads;
      case ops::DecayKind::channel: return c.heads * c.d_k;
    }
    return 0;
  }
};

}  // namespace

const MixerFamily& delta_rule_family() {
  static const DeltaRuleFamily family;
  return family;
}

}  // namespace linea
