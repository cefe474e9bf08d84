// The tables behind inference/hf_checkpoint.h: what a stack of one linear mixer (with or without
// softmax attention layers) is in fla's Hugging Face format, one table per mixer family:
// hf_delta_rule.cpp (delta_net, gated_deltanet, kda; GDN-2 refused), hf_attention.cpp
// (transformer and fla's hybrid `attn` block), hf_gla_family.cpp (gla, retnet, hgrn2, mamba2;
// RWKV-6 refused), hf_hgrn.cpp (hgrn).
//
// A table, made from a resolved model config, gives fla's model_type and the mixer's config.json
// keys; the shape of fla's block (with or without its MLP; whether the model type takes the hybrid
// `attn` block; Mamba-2's `backbone` naming); and the tensors of one layer that fla names or holds
// differently: a rename is a Fused of one part, a fusion several parts that fla holds as one tensor,
// concatenated along the first dimension in that order. Every other parameter of a layer keeps its
// name inside the layer; short-conv weights (ParamRole::conv) are [C, W] in linea and [C, 1, W] in
// fla, a fused conv [ΣC, 1, W]. A setting fla's model cannot hold is refused by cannot(), naming
// the [model] key.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace linea::inference::hf {

// std::invalid_argument "fla's Hugging Face format: KEY: WHY" (KEY the dotted config key).
[[noreturn]] void cannot(const std::string& key, const std::string& why);

// The resolved config of `mixer` in c, as its family's type.
template <class T>
const T& mixer_config(const ModelConfig& c, const std::string& mixer) {
  return dynamic_cast<const T&>(*c.mixer_configs.find(mixer));
}

// fla's tensor `fla` of a layer holds linea's tensors `parts` of the same layer (names inside the
// mixer), concatenated along the first dimension.
struct Fused {
  std::string fla;
  std::vector<std::string> parts;
};

struct MixerTable {
  std::string model_type;
  nlohmann::json keys;       // the mixer's config.json keys
  bool mlp = true;           // fla's blocks have the SwiGLU MLP (Mamba-2's have none)
  bool hybrid = true;        // the model type takes fla's hybrid `attn` block
  bool backbone = false;     // Mamba-2's names: backbone.*, layers.{i}.mixer, layers.{i}.norm, norm_f
  std::vector<Fused> layer;  // renames and fusions inside a layer of this mixer
};

// The table of a stack whose linear layers are `mixer` (of the family the function names).
MixerTable delta_rule_table(const ModelConfig& c, const std::string& mixer);
MixerTable gla_family_table(const ModelConfig& c, const std::string& mixer);
MixerTable hgrn_table(const ModelConfig& c, const std::string& mixer);
// Attention alone (fla's transformer), and the hybrid `attn` block of softmax layers `layers`.
MixerTable transformer_table(const ModelConfig& c);
nlohmann::json attention_block(const ModelConfig& c, const std::vector<int64_t>& layers);

}  // namespace linea::inference::hf
