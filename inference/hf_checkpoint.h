// fla / Hugging Face checkpoints: a directory of config.json (fla's model_type and keys) and
// model.safetensors (checkpoint/safetensors.h), the format fla's models are published in.
//
// Models fla can express: every linear layer one delta-rule mixer, deltanet (fla's "delta_net"),
// gdn ("gated_deltanet") or kda ("kda"), optionally with softmax attention layers (fla's hybrid
// `attn` block: layers, num_heads, num_kv_heads, window_size, rope_theta), or attention alone
// ("transformer"); every block with its MLP (intermediate_size = model.mlp_hidden); attention
// with head_dim = d_model / heads (fla derives it so). Anything else is refused naming the key.
//
// Parameter names, one table for the whole stack (linea's follow fla's inside a layer):
//   embedding.weight          ↔ model.embeddings.weight
//   layers.{i}.mixer.NAME     ↔ model.layers.{i}.attn.NAME
//   layers.{i}.NAME           ↔ model.layers.{i}.NAME   (attn_norm, mlp_norm, mlp.*_proj)
//   norm.weight               ↔ model.norm.weight
//   head.weight               ↔ lm_head.weight          (absent with tied embeddings)
// Layouts: equal, except the short convs' weights, [C, W] in linea and [C, 1, W] in fla (a
// Conv1d over one channel per group).
//
// export_hf writes both files, each atomically (temp + rename). import_hf reads them into a
// model of the same architecture: config.json must name the model_type the model's config maps
// to (an unknown one is refused naming the file), and every tensor must be there with its shape
// (a mismatch names the tensor and both shapes). Not yet compared against fla's own classes
// (docs/interchange.md).
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "model/model.h"

namespace linea::inference {

// fla's config.json for a model config; std::invalid_argument naming the key fla cannot express.
nlohmann::json hf_config(const ModelConfig& config);
// fla's name of a linea parameter.
std::string hf_parameter_name(const std::string& linea_name);

void export_hf(const Model& model, const std::filesystem::path& directory);
void import_hf(Model& model, const std::filesystem::path& directory);

}  // namespace linea::inference
