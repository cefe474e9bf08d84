// The gated-linear-attention family in the mixer registry: gla, retnet, hgrn2, mamba2 and rwkv6, one
// op (model/mixers/gla/gla.h) under five layers, each configured from [model.<mixer>] (or the
// family's shared table [model.gla]).
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/mixer_family.h"
#include "model/mixers/gla/gla_configs.h"
#include "model/mixers/gla/gla_layer.h"
#include "model/mixers/gla/gla_problem.h"
#include "model/mixers/gla/hgrn2_layer.h"
#include "model/mixers/gla/mamba2_layer.h"
#include "model/mixers/gla/rwkv6_layer.h"

namespace linea {

namespace {

// The op's forward and backward per token and head, chunked (C = 64): forward 4KV (the state's
// readout and update) + C(K + V) (the causal Gram and its product with V, triangular); the backward
// about three times that (twice the forward's products, and the chunk states recomputed).
double gla_op_flops(int64_t heads, int64_t key_dim, int64_t value_dim) {
  const double C = 64, K = double(key_dim), V = double(value_dim);
  return double(heads) * 4.0 * (4 * K * V + C * (K + V));
}

class GlaFamily final : public MixerFamily {
 public:
  std::string_view name() const override { return "gla"; }
  const std::vector<std::string>& mixers() const override {
    static const std::vector<std::string> names = {"gla", "retnet", "hgrn2", "mamba2", "rwkv6"};
    return names;
  }
  std::string_view default_mixer() const override { return "gla"; }
  std::string_view shared_section() const override { return "gla"; }
  std::string_view parameter_group() const override { return "linear mixers"; }

  std::unique_ptr<MixerConfig> make_config(std::string_view mixer, std::string section) const override {
    if (mixer == "gla") return std::make_unique<GlaConfig>(std::move(section));
    if (mixer == "retnet") return std::make_unique<RetNetConfig>(std::move(section));
    if (mixer == "hgrn2") return std::make_unique<Hgrn2Config>(std::move(section));
    if (mixer == "mamba2") return std::make_unique<Mamba2Config>(std::move(section));
    if (mixer == "rwkv6") return std::make_unique<Rwkv6Config>(std::move(section));
    throw std::invalid_argument("gla family: unknown mixer '" + std::string(mixer) + "'");
  }

  std::unique_ptr<Mixer> make_layer(ParameterSet& params, const std::string& prefix, int64_t d_model, double norm_eps,
                                    const MixerConfig& config, const TensorParallel& tp,
                                    const LayerPlace& place) const override {
    if (config.mixer == "gla")
      return std::make_unique<GlaLayer>(params, prefix, d_model, as<GlaConfig>(config), norm_eps, tp);
    if (config.mixer == "retnet") {
      return std::make_unique<GlaLayer>(params, prefix, d_model, as<RetNetConfig>(config), norm_eps, tp);
    }
    if (config.mixer == "hgrn2") {
      return std::make_unique<Hgrn2Layer>(params, prefix, d_model, as<Hgrn2Config>(config), norm_eps, tp, place);
    }
    if (config.mixer == "mamba2") {
      return std::make_unique<Mamba2Layer>(params, prefix, d_model, as<Mamba2Config>(config), norm_eps, tp);
    }
    return std::make_unique<Rwkv6Layer>(params, prefix, d_model, as<Rwkv6Config>(config), norm_eps, tp);
  }

  // The layers run in the step's dtype throughout (and on the CPU only, so far).
  double wide_values_per_token(const MixerConfig&) const override { return 0; }
  double cuda_workspace_bytes(const MixerConfig&, int64_t) const override { return 0; }

  double mixing_flops_per_token(const MixerConfig& config, int64_t) const override {
    if (config.mixer == "gla") {
      const HeadWidths& w = as<GlaConfig>(config).widths;
      return gla_op_flops(w.heads, w.d_k, w.d_v);
    }
    if (config.mixer == "retnet") {
      const HeadWidths& w = as<RetNetConfig>(config).widths;
      return gla_op_flops(w.heads, w.d_k, w.d_v);
    }
    if (config.mixer == "hgrn2") {
      const Hgrn2Config& c = as<Hgrn2Config>(config);
      return gla_op_flops(c.heads, c.expand_ratio, c.d_v);
    }
    if (config.mixer == "mamba2") {
      const Mamba2Config& c = as<Mamba2Config>(config);
      return gla_op_flops(c.heads, c.state_size, c.head_dim);
    }
    const HeadWidths& w = as<Rwkv6Config>(config).widths;
    return gla_op_flops(w.heads, w.d_k, w.d_v);
  }

  // The op's state H·K·V per sequence; Mamba-2's convs keep conv − 1 inputs of x, B and C,
  // RWKV-6's token shift the previous x.
  DecodingMemory decoding_memory(const MixerConfig& config, int64_t d_model) const override {
    const auto state = [](int64_t heads, int64_t k, int64_t v) { return double(heads) * double(k) * double(v); };
    if (config.mixer == "gla") {
      const HeadWidths& w = as<GlaConfig>(config).widths;
      return {state(w.heads, w.d_k, w.d_v)};
    }
    if (config.mixer == "retnet") {
      const HeadWidths& w = as<RetNetConfig>(config).widths;
      return {state(w.heads, w.d_k, w.d_v)};
    }
    if (config.mixer == "hgrn2") {
      const Hgrn2Config& c = as<Hgrn2Config>(config);
      return {state(c.heads, c.expand_ratio, c.d_v)};
    }
    if (config.mixer == "mamba2") {
      const Mamba2Config& c = as<Mamba2Config>(config);
      return {state(c.heads, c.state_size, c.head_dim) + double(c.conv - 1) * double(c.inner + 2 * c.state_size)};
    }
    const HeadWidths& w = as<Rwkv6Config>(config).widths;
    return {state(w.heads, w.d_k, w.d_v) + double(d_model)};
  }

  const MixerProblemFormat* problem_format() const override { return &gla_problem_format(); }

 private:
  template <class T>
  static const T& as(const MixerConfig& config) {
    return config_as<T>(config);
  }
};

}  // namespace

const MixerFamily& gla_family() {
  static const GlaFamily family;
  return family;
}

}  // namespace linea
