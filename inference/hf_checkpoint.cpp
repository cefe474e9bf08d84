#include "inference/hf_checkpoint.h"

#include <fstream>
#include <set>
#include <stdexcept>
#include <vector>

#include "checkpoint/safetensors.h"
#include "data/atomic_file.h"
#include "model/mixers/attention/attention_config.h"
#include "model/mixers/delta_rule/delta_rule_config.h"

namespace linea::inference {

namespace fs = std::filesystem;

namespace {

// fla's model_type of a linear mixer of the delta rule.
std::string linear_model_type(const std::string& mixer) {
  if (mixer == "deltanet") return "delta_net";
  if (mixer == "gdn") return "gated_deltanet";
  if (mixer == "kda") return "kda";
  return "";
}

// Export and import (init_from = "hf:DIR") both map a config through hf_config.
[[noreturn]] void cannot(const std::string& key, const std::string& why) {
  throw std::invalid_argument("fla's Hugging Face format: model." + key + ": " + why);
}

// The short convs' weights: [C, W] here, [C, 1, W] in fla.
bool is_conv(const std::string& name) { return name.find("_conv1d.weight") != std::string::npos; }

Shape hf_shape(const std::string& name, const Shape& shape) {
  return is_conv(name) ? Shape{shape[0], 1, shape[1]} : shape;
}

}  // namespace

std::string hf_parameter_name(const std::string& name) {
  if (name == "embedding.weight") return "model.embeddings.weight";
  if (name == "norm.weight") return "model.norm.weight";
  if (name == "head.weight") return "lm_head.weight";
  const std::string mixer = ".mixer.";
  const size_t at = name.find(mixer);
  if (name.rfind("layers.", 0) == 0 && at != std::string::npos) {
    return "model." + name.substr(0, at) + ".attn." + name.substr(at + mixer.size());
  }
  return "model." + name;
}

nlohmann::json hf_config(const ModelConfig& given) {
  ModelConfig c = given;
  c.resolve();
  if (!c.mlp) cannot("mlp", "fla's blocks always have an MLP");
  if (c.routing.kind != RoutingKind::none) {
    cannot("routing",
           std::string("fla's models have no cross-layer routing, this one has ") + routing_kind_name(c.routing.kind));
  }
  std::string linear;
  std::vector<int64_t> attention_layers;
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string& m = c.layer_mixers[static_cast<size_t>(i)];
    if (m == "attention") {
      attention_layers.push_back(i);
    } else if (linear_model_type(m).empty()) {
      cannot("mixer", "'" + m + "' has no fla name table yet (deltanet, gdn, kda and attention have)");
    } else if (!linear.empty() && m != linear) {
      cannot("layer_mixers", "fla's models hold one linear mixer, this one " + linear + " and " + m);
    } else {
      linear = m;
    }
  }
  nlohmann::json j = {{"model_type", linear.empty() ? "transformer" : linear_model_type(linear)},
                      {"hidden_size", c.d_model},
                      {"num_hidden_layers", c.layers},
                      {"vocab_size", c.vocab},
                      {"intermediate_size", c.mlp_hidden},
                      {"hidden_act", "swish"},
                      {"norm_eps", c.norm_eps},
                      {"tie_word_embeddings", c.tie_embeddings},
                      {"initializer_range", c.init_std},
                      {"fuse_norm", true},
                      {"fuse_swiglu", true},
                      {"fuse_cross_entropy", true}};
  if (!attention_layers.empty()) {
    const AttentionConfig& a = c.mixer_config<AttentionConfig>("attention");
    if (a.heads * a.head_dim != c.d_model) {
      cannot("attention.head_dim",
             "fla's attention has head_dim = hidden_size / num_heads = " + std::to_string(c.d_model / a.heads) +
                 ", this one " + std::to_string(a.head_dim));
    }
    const nlohmann::json window = a.window > 0 ? nlohmann::json(a.window) : nlohmann::json(nullptr);
    if (linear.empty()) {
      j.update({{"num_heads", a.heads},
                {"num_kv_heads", a.kv_heads},
                {"window_size", window},
                {"rope_theta", a.rope_theta}});
    } else {
      j["attn"] = {{"layers", attention_layers}, {"num_heads", a.heads},  {"num_kv_heads", a.kv_heads},
                   {"qkv_bias", false},          {"window_size", window}, {"rope_theta", a.rope_theta}};
    }
  }
  if (!linear.empty()) {
    const DeltaRuleConfig& d = c.mixer_config<DeltaRuleConfig>(linear);
    j.update({{"num_heads", d.heads},
              {"use_short_conv", d.conv > 0},
              {"conv_size", d.conv > 0 ? d.conv : 4},
              {"allow_neg_eigval", d.allow_neg_eigval},
              {"expand_v", double(d.d_v) / double(d.d_k)}});
    if (linear == "deltanet") {
      j.update({{"expand_k", double(d.heads * d.d_k) / double(c.d_model)},
                {"expand_v", double(d.heads * d.d_v) / double(c.d_model)},
                {"use_gate", d.output_gate},
                {"use_beta", true},
                {"use_output_norm", true},
                {"qk_norm", "l2"},
                {"qk_activation", "silu"}});
    } else {
      j["head_dim"] = d.d_k;
    }
    if (linear == "gdn") j["use_gate"] = d.output_gate;
    if (linear == "kda" && (d.decay_rank != d.d_v || d.gate_rank != d.d_v || !d.output_gate)) {
      cannot("kda", "fla's KDA has decay_rank = gate_rank = d_v and an output gate");
    }
    if (linear == "gdn" && !d.output_gate) cannot("gdn.output_gate", "fla's use_gate = false has no o_norm gate");
  }
  return j;
}

void export_hf(const Model& model, const fs::path& directory) {
  const nlohmann::json config = hf_config(model.config());
  if (model.device() != Device::cpu || model.params().dtype() != DType::f32) {
    throw std::invalid_argument("export --format hf: f32 models on the CPU only");
  }
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const Parameter& p : model.params().params()) {
    tensors.emplace_back(hf_parameter_name(p.name), p.value.reshape(hf_shape(p.name, p.shape)));
  }
  fs::create_directories(directory);
  write_safetensors(directory / "model.safetensors", tensors, {{"format", "pt"}});
  const std::string text = config.dump(2) + "\n";
  data::AtomicFileWriter out(directory / "config.json");
  out.write(text.data(), text.size());
  out.commit();
}

void import_hf(Model& model, const fs::path& directory) {
  const fs::path config_path = directory / "config.json";
  std::ifstream in(config_path);
  if (!in) throw std::runtime_error(config_path.string() + ": cannot be opened (expected fla's config.json)");
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, false);
  if (!config.is_object() || !config.contains("model_type") || !config["model_type"].is_string()) {
    throw std::runtime_error(config_path.string() + ": expected a JSON object with a string model_type");
  }
  const std::string type = config["model_type"].get<std::string>();
  static const std::set<std::string> known = {"transformer", "delta_net", "gated_deltanet", "kda"};
  if (!known.count(type)) {
    throw std::runtime_error(config_path.string() + ": unknown model_type \"" + type +
                             "\"; linea reads transformer, delta_net, gated_deltanet and kda");
  }
  const std::string expected = hf_config(model.config())["model_type"].get<std::string>();
  if (type != expected) {
    throw std::runtime_error(config_path.string() + ": model_type \"" + type + "\", but the [model] config is a " +
                             expected);
  }
  const SafetensorsFile file(directory / "model.safetensors");
  model.params().with_host_values([&] {
    for (Parameter& p : model.params().params()) {
      const std::string name = hf_parameter_name(p.name);
      if (!file.contains(name)) {
        throw std::runtime_error(file.path().string() + ": no tensor " + name + " (linea's " + p.name + ")");
      }
      const Shape expected_shape = hf_shape(p.name, p.shape);
      if (file.shape(name) != expected_shape) {
        throw std::runtime_error(file.path().string() + ": tensor " + name + " is " + shape_string(file.shape(name)) +
                                 ", the model's " + p.name + " needs " + shape_string(expected_shape));
      }
      p.value.copy_from(file.read_f32(name).reshape(p.shape));
    }
  });
}

}  // namespace linea::inference
