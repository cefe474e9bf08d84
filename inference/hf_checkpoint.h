// fla / Hugging Face checkpoints: a directory of config.json (fla's model_type and keys) and
// model.safetensors (checkpoint/safetensors.h), the format fla's models are published in.
//
// Models fla can express: every linear layer one mixer that fla has a model type for —
// deltanet ("delta_net"), gdn ("gated_deltanet"), kda ("kda"), gla ("gla"), retnet ("retnet"),
// hgrn ("hgrn"), hgrn2 ("hgrn2"), mamba2 ("mamba2") — optionally with softmax attention layers
// (fla's hybrid `attn` block: layers, num_heads, num_kv_heads, window_size, rope_theta; not for
// mamba2), or attention alone ("transformer"); every block with its MLP (intermediate_size =
// model.mlp_hidden), except Mamba-2's, which have none (model.mlp = false); attention with
// head_dim = d_model / heads (fla derives it so). GDN-2 (fla has the layer but no model type) and
// RWKV-6 (fla's model has LayerNorm blocks with RWKV's channel mix) are refused, and so is any
// setting fla's model cannot hold, each naming the [model] key (inference/hf_tables.h).
//
// Parameter names, one table for the whole stack (linea's follow fla's inside a layer, except where
// a family's table, inference/hf_*.cpp, renames or fuses):
//   embedding.weight          ↔ model.embeddings.weight
//   layers.{i}.mixer.NAME     ↔ model.layers.{i}.attn.NAME
//   layers.{i}.NAME           ↔ model.layers.{i}.NAME   (attn_norm, mlp_norm, mlp.*_proj)
//   <mixer>.NAME              ↔ model.NAME              (HGRN's and HGRN-2's lower_bounds)
//   norm.weight               ↔ model.norm.weight
//   head.weight               ↔ lm_head.weight          (absent with tied embeddings)
// and for mamba2 backbone.embeddings, backbone.layers.{i}.mixer.NAME, backbone.layers.{i}.norm
// (linea's attn_norm), backbone.norm_f. Layouts: equal, except the short convs' weights, [C, W] in
// linea and [C, 1, W] in fla, and the tensors fla fuses (Mamba-2's in_proj and conv1d), which are
// linea's concatenated along the first dimension.
//
// export_hf writes both files, each atomically (temp + rename). import_hf reads them into a
// model of the same architecture: config.json must name the model_type the model's config maps
// to (an unknown one is refused naming the file), and every tensor must be there with its shape
// (a mismatch names the tensor and both shapes). Checked against fla's own model classes both ways
// by scripts/compare-fla-logits.py (docs/interchange.md has the figures).
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/model.h"

namespace linea::inference {

// fla's config.json for a model config; std::invalid_argument naming the key fla cannot express.
nlohmann::json hf_config(const ModelConfig& config);

void export_hf(const Model& model, const std::filesystem::path& directory);
void import_hf(Model& model, const std::filesystem::path& directory);

}  // namespace linea::inference
