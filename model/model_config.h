// ModelConfig: the shape of a decoder-only LM, read from the [model] table of a TOML config.
//
//   [model]          d_model, layers, vocab (required); tie_embeddings, mlp_hidden (0 →
//                    256·ceil(int(8d/3)/256), as fla), mlp (default true; false: blocks of a mixer
//                    alone, as flame's Mamba-2 stack), norm_eps, init_std, init_from ("hf:DIR": start
//                    from the weights of an fla / Hugging Face checkpoint, inference/hf_checkpoint.h,
//                    instead of the seeded init; a resumed checkpoint still wins); and the layers' mixers,
//                    given in one of two ways:
//                      mixer (deltanet | gdn | kda | gdn2 | attention | gla | retnet | hgrn2 |
//                      mamba2 | rwkv6 | hgrn: every mixer name of the registry) and hybrid ("pure"; "r:1" = r layers of
//                      `mixer` then 1 softmax attention layer, repeated; or a list of attention layer indices); or
//                      layer_mixers: a list of mixer names, one per layer, or a pattern string that
//                      repeats to fill the layers; both made of terms "name" or "N*name", e.g.
//                      "3*gdn,attention" (a string's terms are comma-separated).
//   [model.<mixer>]  the config of that mixer (its family's keys), for a hybrid of two mixers of one
//                    family (gdn and kda) or to set one mixer apart
//   [model.linear]   the config of the delta-rule mixers that have no table of their own: heads, d_k,
//                    d_v, conv, output_gate, allow_neg_eigval, decay_rank, gate_rank, recompute
//                    (model/mixers/delta_rule/delta_rule_config.h)
//   [model.routing]  cross-layer routing between the delta-rule layers: kind (none | cler | cler_h |
//                    clvr), layers, stop_grad, projection, resume_unrouted (model/routing_config.h)
//   [model.attention] softmax attention's: heads, kv_heads, head_dim, window, rope_theta, backend,
//                    cudnn_autotune (model/mixers/attention/attention_config.h)
// See reference/mixers.md §1 (layers), §4 (reference shapes, hybrid layouts). parse() validates
// every field and shape; errors name the file and the dotted key.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/config_reader.h"
#include "model/mixer_config.h"
#include "model/routing_config.h"

namespace linea {

// The configs of a model's mixers, one per mixer name, copied deeply with the ModelConfig.
class MixerConfigSet {
 public:
  MixerConfigSet() = default;
  MixerConfigSet(const MixerConfigSet& other);
  MixerConfigSet& operator=(const MixerConfigSet& other);
  MixerConfigSet(MixerConfigSet&&) noexcept = default;
  MixerConfigSet& operator=(MixerConfigSet&&) noexcept = default;

  // The config of `mixer`; null when there is none.
  MixerConfig* find(std::string_view mixer);
  const MixerConfig* find(std::string_view mixer) const;
  // The config of `mixer`, made with its family's defaults when there is none yet.
  MixerConfig& get(std::string_view mixer);
  // Adds or replaces the config of config->mixer.
  void put(std::unique_ptr<MixerConfig> config);

 private:
  std::vector<std::unique_ptr<MixerConfig>> configs_;
};

struct ModelConfig {
  int64_t d_model = 0;
  int64_t layers = 0;
  int64_t vocab = 0;
  bool tie_embeddings = false;
  int64_t mlp_hidden = 0;
  bool mlp = true;  // every block has its SwiGLU MLP (and mlp_norm); false: blocks of a mixer alone
  double norm_eps = 1e-6;
  std::string init_from;  // "" or "hf:DIR"
  double init_std = 0.02;
  // The layers' mixers as given: mixer and hybrid, or (when layer_mixers_terms is not empty)
  // layer_mixers.
  std::string mixer = "gdn";
  std::string hybrid = "pure";                  // as written in the config
  std::vector<int64_t> attention_layers;        // sorted indices of the softmax layers of `hybrid`
  std::vector<std::string> layer_mixers_terms;  // "name" or "N*name" each
  bool layer_mixers_repeat = false;             // a pattern string (else a list: one per layer)
  // Filled by resolve(): the mixer of every layer; and the config of every mixer they name.
  std::vector<std::string> layer_mixers;
  MixerConfigSet mixer_configs;
  RoutingConfig routing;  // resolved against layer_mixers by resolve()

  // Reads and validates [model] and its mixers' tables; fills every derived default.
  static ModelConfig parse(ConfigSection model);
  // Fills the derived defaults (the layers' mixers, their configs' widths and head dims,
  // mlp_hidden, the layers of a pure transformer) and checks every field and shape; throws
  // std::invalid_argument naming the key ("FILE: model.linear.heads: ..." through `section`,
  // "ModelConfig: model.…" without one). A mixer without a config gets its family's defaults.
  void resolve(const ConfigSection* section = nullptr);

  // The config of mixer `name` as its family's type T, made with the family's defaults when
  // absent: for configs built in code (mixer_config<DeltaRuleConfig>("gdn").heads = 2).
  template <class T>
  T& mixer_config(std::string_view name) {
    return dynamic_cast<T&>(mixer_configs.get(name));
  }
  // The (resolved) config of layer `layer`'s mixer.
  const MixerConfig& layer_config(int64_t layer) const;
  // The mixers of the layers, each once, in the order of their first layer.
  std::vector<std::string> distinct_mixers() const;
  // How the config names its mixers: `mixer`, or the layer_mixers terms joined by commas.
  std::string mixers_description() const;

 private:
  // layer_mixers from mixer and hybrid, or from layer_mixers_terms; errors name model.hybrid,
  // model.mixer or model.layer_mixers.
  void resolve_layer_mixers(const ConfigSection* section);
};

// The attention layer indices a hybrid rule gives for `layers` layers: "pure" → none; "r:1" → the
// stack cut from its first layer into groups of r + 1, attention at the last layer of every whole
// group, a trailing partial group all linear (24 layers "3:1" → 3, 7, …, 23; 24 layers "6:1" → 6,
// 13, 20). A stack shorter than one group is one group: attention at its last layer (21 or 24
// layers "24:1" → the last layer), so every ratio resolves for every layer count. Throws
// std::invalid_argument (without a key name) for a malformed rule.
std::vector<int64_t> hybrid_attention_layers(std::string_view rule, int64_t layers);

// The mixer of every one of `layers` layers from layer_mixers terms ("name" or "N*name"): a list
// gives exactly `layers` mixers; a pattern (repeat) repeats to fill them (layers must be a
// multiple of its length). Throws std::invalid_argument (without a key name) for a malformed term,
// an unknown mixer name or a count that does not fit.
std::vector<std::string> expand_layer_mixers(const std::vector<std::string>& terms, bool repeat, int64_t layers);

// fla's default SwiGLU width: 256 · ceil(int(d · 8/3) / 256).
int64_t default_mlp_hidden(int64_t d_model);

}  // namespace linea
