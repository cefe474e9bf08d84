// HGRN in the mixer registry: one mixer, "hgrn", configured from [model.hgrn], built as HgrnLayer.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "model/mixer_family.h"
#include "model/mixers/hgrn/hgrn_config.h"
#include "model/mixers/hgrn/hgrn_layer.h"
#include "model/mixers/hgrn/hgrn_problem.h"

namespace linea {

namespace {

class HgrnFamily final : public MixerFamily {
 public:
  std::string_view name() const override { return "hgrn"; }
  const std::vector<std::string>& mixers() const override {
    static const std::vector<std::string> names = {"hgrn"};
    return names;
  }
  std::string_view default_mixer() const override { return "hgrn"; }
  std::string_view shared_section() const override { return "hgrn"; }
  std::string_view parameter_group() const override { return "linear mixers"; }

  std::unique_ptr<MixerConfig> make_config(std::string_view, std::string section) const override {
    return std::make_unique<HgrnConfig>(std::move(section));
  }
  std::unique_ptr<Mixer> make_layer(ParameterSet& params, const std::string& prefix, int64_t d_model, double norm_eps,
                                    const MixerConfig& config, const TensorParallel& tp,
                                    const LayerPlace& place) const override {
    return std::make_unique<HgrnLayer>(params, prefix, d_model, config_as<HgrnConfig>(config), norm_eps, tp, place);
  }

  // The layer keeps its activations in the step's dtype (the f32 gate of a bf16 step is recomputed
  // in the backward: model/wide_gates.h).
  double wide_values_per_token(const MixerConfig&) const override { return 0; }
  // The CUDA backward's f32 carries (model/mixers/hgrn/cuda/hgrn.cu): five per chunk of 64 tokens
  // and channel.
  double cuda_workspace_bytes(const MixerConfig& config, int64_t tokens) const override {
    return 4.0 * 5.0 * std::ceil(double(tokens) / 64.0) * double(config_as<HgrnConfig>(config).width);
  }
  // The scan per channel: 2 FLOPs forward; the backward's recomputed scan, reverse scan and gate
  // gradients about 8.
  double mixing_flops_per_token(const MixerConfig& config, int64_t) const override {
    return 10.0 * double(config_as<HgrnConfig>(config).width);
  }

  // One state value per channel.
  DecodingMemory decoding_memory(const MixerConfig& config, int64_t) const override {
    return {double(config_as<HgrnConfig>(config).width)};
  }

  const MixerProblemFormat* problem_format() const override { return &hgrn_problem_format(); }
};

}  // namespace

const MixerFamily& hgrn_family() {
  static const HgrnFamily family;
  return family;
}

}  // namespace linea
