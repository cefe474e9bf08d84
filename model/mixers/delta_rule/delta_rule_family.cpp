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
  bool routes() const override { return true; }

  std::unique_ptr<MixerConfig> make_config(std::string_view mixer, std::string section) const override {
    return std::make_unique<DeltaRuleConfig>(mixer, std::move(section));
  }
  std::unique_ptr<Mixer> make_layer(ParameterSet& params, const std::string& prefix, int64_t d_model, double norm_eps,
                                    const MixerConfig& config, const TensorParallel& tp,
                                    const LayerPlace& place) const override {
    return std::make_unique<DeltaRuleLayer>(params, prefix, d_model, config_as<DeltaRuleConfig>(config), norm_eps, tp,
                                            place.routing);
  }

  // The decay gate's input W_a x or W_f x stays in the master dtype (f32): one value per head for a
  // scalar decay, one per key channel for a channel decay.
  // The state H·K·V and conv − 1 inputs of each of the q, k and v convs, per sequence.
  DecodingMemory decoding_memory(const MixerConfig& config, int64_t) const override {
    const DeltaRuleConfig& c = config_as<DeltaRuleConfig>(config);
    const double keys = double(c.heads * c.d_k), values = double(c.heads * c.d_v);
    return {keys * double(c.d_v), c.conv > 0 ? double(c.conv - 1) * (2 * keys + values) : 0.0};
  }

  double wide_values_per_token(const MixerConfig& config) const override {
    const DeltaRuleConfig& c = config_as<DeltaRuleConfig>(config);
    return double(decay_width(c));
  }

  // The CUDA bf16 pipeline's buffers (delta_rule_bf16.cu, Bf16Sizes): the backward's own (dŨ, dh),
  // and the kept ones, in the workspace when the backward recomputes them, else in the layer's
  // saved buffer (cuda_saved_bytes).
  double cuda_workspace_bytes(const MixerConfig& config, int64_t tokens) const override {
    const DeltaRuleConfig& c = config_as<DeltaRuleConfig>(config);
    const double per_head = 2.0 * double(c.d_v) + 2.0 * double(c.d_k * c.d_v) / kChunk;
    return double(tokens) * double(c.heads) * (per_head + (c.recompute ? kept_per_token_and_head(c) : 0.0));
  }

  double cuda_saved_bytes(const MixerConfig& config, int64_t tokens) const override {
    const DeltaRuleConfig& c = config_as<DeltaRuleConfig>(config);
    return c.recompute ? 0.0 : double(tokens) * double(c.heads) * kept_per_token_and_head(c);
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
  static constexpr double kChunk = 64;

  // Per token and head, what the bf16 forward can keep for the backward (bf16 but for the f32
  // decays): G (scalar decay), T (a C × C tile per chunk), W, U, Ũ, h (a K × V state per chunk); a
  // decay per channel adds G_L (K per chunk), K ⊙ exp(G_L − G), scale Q ⊙ γ and scale P (a tile per
  // chunk). The segments' transitions (long sequences on few heads) are left out.
  static double kept_per_token_and_head(const DeltaRuleConfig& c) {
    const double K = double(c.d_k), V = double(c.d_v), tile = 2.0 * kChunk;
    double bytes = tile + 2 * K + 4 * V + 2 * K * V / kChunk;
    if (c.preset.decay == ops::DecayKind::scalar) bytes += 4;
    if (c.preset.decay == ops::DecayKind::channel) bytes += 4 * K / kChunk + 4 * K + tile;
    return bytes;
  }

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
