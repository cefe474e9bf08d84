// ModelConfig: the shape of a decoder-only LM, read from the [model] table of a TOML config.
//
//   [model]            d_model, layers, vocab (required); mixer (required: deltanet | gdn | kda | gdn2 |
//                      attention); tie_embeddings, mlp_hidden (0 → 256·ceil(int(8d/3)/256), as fla),
//                      norm_eps, init_std, hybrid ("pure"; "r:1" = r linear layers then 1 softmax
//                      layer, repeated; or a list of attention layer indices)
//   [model.linear]     heads, d_k (default d_model/heads), d_v (default d_k), conv (kernel size, 0 = no
//                      conv), output_gate, allow_neg_eigval, decay_rank and gate_rank (the inner
//                      width of KDA/GDN-2's low-rank decay and output-gate projections; 0 → d_v)
//   [model.attention]  heads, kv_heads (default heads), head_dim (default d_model/heads), window
//                      (0 = full causal), rope_theta
// See reference/mixers.md §1 (layers), §4 (reference shapes, hybrid layouts). parse() validates
// every field and shape; errors name the file and the dotted key.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/config_reader.h"

namespace linea {

enum class MixerKind { deltanet, gdn, kda, gdn2, attention };
std::string_view mixer_kind_name(MixerKind kind);

struct LinearMixerConfig {
  int64_t heads = 4;
  int64_t d_k = 0;  // 0 → d_model / heads
  int64_t d_v = 0;  // 0 → d_k
  int64_t conv = 4;
  bool output_gate = true;  // DeltaNet's default is off
  bool allow_neg_eigval = false;
  int64_t decay_rank = 0;  // KDA/GDN-2 f_proj: d → decay_rank → heads·d_k (0 → d_v)
  int64_t gate_rank = 0;   // KDA/GDN-2 g_proj: d → gate_rank → heads·d_v (0 → d_v)
};

struct AttentionConfig {
  int64_t heads = 0;     // 0 → d_model / head_dim
  int64_t kv_heads = 0;  // 0 → heads
  int64_t head_dim = 0;  // 0 → d_model / heads, or 64 when heads is 0 too
  int64_t window = 0;
  double rope_theta = 10000.0;
};

struct ModelConfig {
  int64_t d_model = 0;
  int64_t layers = 0;
  int64_t vocab = 0;
  bool tie_embeddings = false;
  int64_t mlp_hidden = 0;
  double norm_eps = 1e-6;
  double init_std = 0.02;
  MixerKind mixer = MixerKind::gdn;
  std::string hybrid = "pure";            // as written in the config
  std::vector<int64_t> attention_layers;  // sorted indices of the softmax layers (all when mixer = attention)
  LinearMixerConfig linear;
  AttentionConfig attention;

  // Reads and validates [model], [model.linear] and [model.attention]; fills every derived default.
  static ModelConfig parse(ConfigSection model);
  // Fills the derived defaults (d_k, d_v, ranks, head dims, mlp_hidden, the layers of a pure
  // transformer) and checks every field and shape; throws std::invalid_argument naming the key
  // ("FILE: model.linear.heads: ..." through `section`, "ModelConfig: model.…" without one).
  void resolve(const ConfigSection* section = nullptr);

  bool is_attention_layer(int64_t layer) const;
  bool has_linear_layers() const;
  bool has_attention_layers() const { return !attention_layers.empty(); }
};

// The attention layer indices a hybrid rule gives for `layers` layers: "pure" → none; "r:1" → the
// stack cut from its first layer into groups of r + 1, attention at the last layer of every whole
// group, a trailing partial group all linear (24 layers "3:1" → 3, 7, …, 23; 24 layers "6:1" → 6,
// 13, 20). A stack shorter than one group is one group: attention at its last layer (21 or 24
// layers "24:1" → the last layer), so every ratio resolves for every layer count. Throws
// std::invalid_argument (without a key name) for a malformed rule.
std::vector<int64_t> hybrid_attention_layers(std::string_view rule, int64_t layers);

// fla's default SwiGLU width: 256 · ceil(int(d · 8/3) / 256).
int64_t default_mlp_hidden(int64_t d_model);

}  // namespace linea
