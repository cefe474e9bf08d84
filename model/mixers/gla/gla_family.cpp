// The gated-linear-attention family in the mixer registry: gla, retnet, hgrn2, mamba2 and rwkv6, one
// op (model/mixers/gla/gla.h) under five layers, each configured from [model.<mixer>] (or the
// family's shared table [model.gla]).
#include <algorithm>
#include <cmath>
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

// The op's shape in one layer: heads, key and value widths per head, the log decays per token and
// head (K per channel, 1 per token, 0 fixed), the bonus readout.
// tied: HGRN-2's key k = 1 − exp(g); recompute: the config's (no saved buffer).
struct OpShape {
  int64_t heads = 0, key_dim = 0, value_dim = 0, decay_width = 0;
  bool bonus = false, tied = false, recompute = false;
};

OpShape op_shape(const MixerConfig& config) {
  if (config.mixer == "gla") {
    const GlaConfig& c = config_as<GlaConfig>(config);
    return {c.widths.heads, c.widths.d_k, c.widths.d_v, c.widths.d_k, false, false, c.recompute};
  }
  if (config.mixer == "retnet") {
    const RetNetConfig& c = config_as<RetNetConfig>(config);
    return {c.widths.heads, c.widths.d_k, c.widths.d_v, 0, false, false, c.recompute};
  }
  if (config.mixer == "hgrn2") {
    const Hgrn2Config& c = config_as<Hgrn2Config>(config);
    return {c.heads, c.expand_ratio, c.d_v, c.expand_ratio, false, true, c.recompute};
  }
  if (config.mixer == "mamba2") {
    const Mamba2Config& c = config_as<Mamba2Config>(config);
    return {c.heads, c.state_size, c.head_dim, 1, false, false, c.recompute};
  }
  const Rwkv6Config& c = config_as<Rwkv6Config>(config);
  return {c.widths.heads, c.widths.d_k, c.widths.d_v, c.widths.d_k, true, false, c.recompute};
}

constexpr double kChunk = 64;

// Whether a bf16 step runs the op on the delta rule's bf16 pipeline as its plain write
// (model/mixers/gla/cuda/gla.cu; delta_rule_bf16.h): K ≤ 256 and V ≤ 512, both multiples of 8
// (RWKV-6's bonus readout included).
bool plain_write(const OpShape& s) {
  return s.key_dim <= 256 && s.value_dim <= 512 && s.key_dim % 8 == 0 && s.value_dim % 8 == 0;
}

// Per token and head, what that pipeline's forward can keep for the backward of a plain write
// (delta_rule_bf16.cu, Bf16Sizes; bf16 but for the f32 decays): h (a K × V state per chunk); a
// decay per token (or per head: RetNet's) its G; a decay per channel G_L (K per chunk),
// K ⊙ exp(G_L − G), scale Q ⊙ γ and scale P (a C × C tile per chunk). The segments' transitions
// (long sequences on few heads) are left out.
double plain_kept_per_token_and_head(const OpShape& s) {
  const double K = double(s.key_dim), V = double(s.value_dim);
  double bytes = 2 * K * V / kChunk;
  const bool per_channel = s.decay_width > 1;  // (a plain write has K ≥ 8)
  if (per_channel) return bytes + 4 * K / kChunk + 2 * K + 2 * K + 2 * kChunk;
  return bytes + 4;
}

// The op's forward and backward per token and head, chunked (C = 64): forward 4KV (the state's
// readout and update) + C(K + V) (the causal Gram and its product with V, triangular); the backward
// about three times that (twice the forward's products, and the chunk states recomputed).
double gla_op_flops(const OpShape& s) {
  const double C = 64, K = double(s.key_dim), V = double(s.value_dim);
  return double(s.heads) * 4.0 * (4 * K * V + C * (K + V));
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

  // The layers keep their activations in the step's dtype (the f32 gates of a bf16 step are
  // recomputed in the backward: model/wide_gates.h).
  double wide_values_per_token(const MixerConfig&) const override { return 0; }
  // The CUDA backward's workspaces (model/mixers/gla/cuda/gla.cu). On the bf16 pipeline (a plain
  // write): the state gradient leaving each chunk (bf16 K × V per chunk and head; dŨ is dv itself),
  // HGRN-2's tied key and its gradient (bf16 K each per token and head), RWKV-6's parts of du (f32 K
  // per chunk and head), and the kept buffers when
  // the backward recomputes them (else they are in the layer's saved buffer, cuda_saved_bytes).
  // Otherwise (gla_kernels.cuh): G per token and head (f64); f32 P and dP per chunk and head
  // (C × C), the states entering and the gradients leaving each chunk (K × V each), the bonus's
  // parts of du (K per chunk and head).
  double cuda_workspace_bytes(const MixerConfig& config, int64_t tokens) const override {
    const OpShape s = op_shape(config);
    if (plain_write(s)) {
      const double K = double(s.key_dim), V = double(s.value_dim);
      const double per_head = 2 * K * V / kChunk + (s.tied ? 4 * K : 0.0) + (s.bonus ? 4 * K / kChunk : 0.0) +
                              (s.recompute ? plain_kept_per_token_and_head(s) : 0.0);
      return double(tokens) * double(s.heads) * per_head;
    }
    const double chunk = kChunk, chunks = std::ceil(double(tokens) / chunk), heads = double(s.heads);
    const double decays = double(tokens) * heads * double(std::max<int64_t>(s.decay_width, 1));
    const double tiles = chunks * heads * chunk * chunk, states = chunks * heads * double(s.key_dim * s.value_dim);
    const double parts = s.bonus ? chunks * heads * double(s.key_dim) : 0;
    return 8.0 * decays + 4.0 * (2 * tiles + 2 * states + parts);
  }

  // What the bf16 pipeline's forward keeps in the layer's saved buffer (ops::gla_saved_bytes) unless
  // recompute; nothing for the calls gla_kernels.cuh runs (widths the pipeline does not take).
  double cuda_saved_bytes(const MixerConfig& config, int64_t tokens) const override {
    const OpShape s = op_shape(config);
    if (s.recompute || !plain_write(s)) return 0;
    return double(tokens) * double(s.heads) * plain_kept_per_token_and_head(s);
  }

  double mixing_flops_per_token(const MixerConfig& config, int64_t) const override {
    return gla_op_flops(op_shape(config));
  }

  // The op's state H·K·V per sequence; Mamba-2's convs keep conv − 1 inputs of x, B and C, GLA's
  // and RetNet's (when conv > 0) of q, k and v, RWKV-6's token shift the previous x.
  DecodingMemory decoding_memory(const MixerConfig& config, int64_t d_model) const override {
    const OpShape s = op_shape(config);
    const double state = double(s.heads) * double(s.key_dim) * double(s.value_dim);
    if (config.mixer == "mamba2") {
      const Mamba2Config& c = config_as<Mamba2Config>(config);
      return {state, double(c.conv - 1) * double(c.inner + 2 * c.state_size)};
    }
    if (config.mixer == "rwkv6") return {state, double(d_model)};
    const int64_t conv = config.mixer == "gla"      ? as<GlaConfig>(config).conv
                         : config.mixer == "retnet" ? as<RetNetConfig>(config).conv
                                                    : 0;
    if (conv > 0) return {state, double(conv - 1) * double(s.heads * (2 * s.key_dim + s.value_dim))};
    return {state};
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
