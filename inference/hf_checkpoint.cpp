#include "inference/hf_checkpoint.h"

#include <algorithm>
#include <deque>
#include <fstream>
#include <map>
#include <stdexcept>
#include <vector>

#include "checkpoint/safetensors.h"
#include "data/atomic_file.h"
#include "inference/hf_tables.h"
#include "model/mixer_registry.h"

namespace linea::inference {

namespace fs = std::filesystem;

namespace hf {

void cannot(const std::string& key, const std::string& why) {
  throw std::invalid_argument("fla's Hugging Face format: " + key + ": " + why);
}

}  // namespace hf

namespace {

// Every model_type a table gives (import refuses the others by name).
const std::vector<std::string> kModelTypes = {"transformer", "delta_net", "gated_deltanet", "kda",   "gla",
                                              "retnet",      "hgrn",      "hgrn2",          "mamba2"};

// The table of a stack whose linear layers are `mixer`, from its family's.
hf::MixerTable linear_table(const ModelConfig& c, const std::string& mixer) {
  const std::string_view family = mixer_family(mixer).name();
  if (family == "delta_rule") return hf::delta_rule_table(c, mixer);
  if (family == "gla") return hf::gla_family_table(c, mixer);
  if (family == "hgrn") return hf::hgrn_table(c, mixer);
  hf::cannot("model.mixer", "'" + mixer + "' has no fla name table");
}

// A model config as fla sees it: the table of its mixers and its config.json.
struct Plan {
  hf::MixerTable table;
  nlohmann::json config;
};

Plan plan(const ModelConfig& given) {
  ModelConfig c = given;
  c.resolve();
  if (c.routing.kind != RoutingKind::none) {
    hf::cannot("model.routing", std::string("fla's models have no cross-layer routing, this one has ") +
                                    routing_kind_name(c.routing.kind));
  }
  std::string linear;
  std::vector<int64_t> attention_layers;
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string& m = c.layer_mixers[static_cast<size_t>(i)];
    if (m == "attention") {
      attention_layers.push_back(i);
    } else if (!linear.empty() && m != linear) {
      hf::cannot("model.layer_mixers", "fla's models hold one linear mixer, this one " + linear + " and " + m);
    } else {
      linear = m;
    }
  }
  Plan p{linear.empty() ? hf::transformer_table(c) : linear_table(c, linear), {}};
  if (c.mlp != p.table.mlp) {
    hf::cannot("model.mlp", p.table.mlp
                                ? "fla's blocks always have an MLP"
                                : "fla's " + p.table.model_type + " blocks have no MLP (set model.mlp = false)");
  }
  if (!linear.empty() && !attention_layers.empty() && !p.table.hybrid) {
    hf::cannot(c.layer_mixers_terms.empty() ? "model.hybrid" : "model.layer_mixers",
               "fla's " + p.table.model_type + " has no hybrid attn block; this stack has attention at layer " +
                   std::to_string(attention_layers.front()));
  }
  p.config = {{"model_type", p.table.model_type}, {"hidden_size", c.d_model},
              {"num_hidden_layers", c.layers},    {"vocab_size", c.vocab},
              {"norm_eps", c.norm_eps},           {"tie_word_embeddings", c.tie_embeddings},
              {"initializer_range", c.init_std},  {"fuse_norm", true},
              {"fuse_cross_entropy", true}};
  if (p.table.mlp) {
    p.config.update({{"intermediate_size", c.mlp_hidden}, {"hidden_act", "swish"}, {"fuse_swiglu", true}});
  }
  p.config.update(p.table.keys);
  if (!linear.empty() && !attention_layers.empty()) p.config["attn"] = hf::attention_block(c, attention_layers);
  return p;
}

// fla's name of a linea parameter that no fusion or rename of the table claims.
std::string fla_name(const std::string& name, const hf::MixerTable& table) {
  const std::string root = table.backbone ? "backbone." : "model.";
  if (name == "embedding.weight") return root + "embeddings.weight";
  if (name == "norm.weight") return root + (table.backbone ? "norm_f.weight" : "norm.weight");
  if (name == "head.weight") return "lm_head.weight";
  if (name.rfind("layers.", 0) != 0) return root + name.substr(name.find('.') + 1);  // <mixer>.X: the stack's
  const std::string mixer = ".mixer.", norm = ".attn_norm.";
  const size_t dot = name.find('.', 7);
  const std::string layer = name.substr(0, dot), rest = name.substr(dot);
  if (rest.rfind(mixer, 0) == 0)
    return root + layer + (table.backbone ? ".mixer." : ".attn.") + rest.substr(mixer.size());
  if (table.backbone && rest.rfind(norm, 0) == 0) return root + layer + ".norm." + rest.substr(norm.size());
  return root + name;
}

// One tensor of fla's checkpoint: its name and shape, and the parameters that fill it in order
// (indices into the model's params()).
struct HfTensor {
  std::string name;
  Shape shape;
  std::vector<size_t> parts;
};

using Params = std::deque<Parameter>;

std::string linea_names(const HfTensor& t, const Params& params) {
  std::string s;
  for (const size_t i : t.parts) s += (s.empty() ? "" : " + ") + params[i].name;
  return s;
}

// fla's shape of the parts stacked along the first dimension; short-conv weights [C, W] as [C, 1, W].
Shape stacked_shape(const HfTensor& t, const Params& params) {
  const Parameter& first = params[t.parts.front()];
  Shape shape = first.shape;
  shape[0] = 0;
  for (const size_t i : t.parts) {
    const Parameter& p = params[i];
    if ((p.role == ParamRole::conv) != (first.role == ParamRole::conv) ||
        !std::equal(p.shape.begin() + 1, p.shape.end(), first.shape.begin() + 1, first.shape.end())) {
      throw std::logic_error("fla table: " + t.name + " stacks " + p.name + " " + shape_string(p.shape) + " on " +
                             first.name + " " + shape_string(first.shape));
    }
    shape[0] += p.shape[0];
  }
  if (first.role == ParamRole::conv) shape.insert(shape.begin() + 1, 1);
  return shape;
}

// Calls fn(i, slice) for every part i of t in order, `slice` its stretch of `flat` (t's tensor as
// one row: the parts stacked along the first dimension are consecutive in memory).
template <class Fn>
void for_each_part(const HfTensor& t, const Params& params, const Tensor& flat, Fn fn) {
  int64_t at = 0;
  for (const size_t i : t.parts) {
    const int64_t n = params[i].value.numel();
    fn(i, flat.slice(at, at + n));
    at += n;
  }
}

// Every tensor of the model's fla checkpoint, each parameter in exactly one.
std::vector<HfTensor> hf_tensors(const Model& model, const hf::MixerTable& table) {
  const Params& params = model.params().params();
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < params.size(); ++i) by_name[params[i].name] = i;
  std::vector<bool> claimed(params.size(), false);
  std::vector<HfTensor> tensors;
  const ModelConfig& c = model.config();
  for (int64_t layer = 0; layer < c.layers; ++layer) {
    if (c.layer_mixers[static_cast<size_t>(layer)] == "attention") continue;
    const std::string prefix = "layers." + std::to_string(layer) + ".mixer.";
    for (const hf::Fused& f : table.layer) {
      HfTensor t{fla_name(prefix + f.fla, table), {}, {}};
      for (const std::string& part : f.parts) {
        const auto found = by_name.find(prefix + part);
        if (found == by_name.end()) {
          throw std::logic_error("fla table of " + table.model_type + ": the model has no " + prefix + part);
        }
        t.parts.push_back(found->second);
        claimed[found->second] = true;
      }
      t.shape = stacked_shape(t, params);
      tensors.push_back(std::move(t));
    }
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (claimed[i]) continue;
    HfTensor t{fla_name(params[i].name, table), {}, {i}};
    t.shape = stacked_shape(t, params);
    tensors.push_back(std::move(t));
  }
  return tensors;
}

}  // namespace

nlohmann::json hf_config(const ModelConfig& config) { return plan(config).config; }

void export_hf(const Model& model, const fs::path& directory) {
  const Plan p = plan(model.config());
  if (model.device() != Device::cpu || model.params().dtype() != DType::f32) {
    throw std::invalid_argument("export --format hf: f32 models on the CPU only");
  }
  const Params& params = model.params().params();
  std::vector<std::pair<std::string, Tensor>> out;
  for (const HfTensor& t : hf_tensors(model, p.table)) {
    Tensor value = Tensor::empty(t.shape, DType::f32);
    for_each_part(t, params, value.reshape({value.numel()}),
                  [&](size_t i, Tensor slice) { slice.copy_from(params[i].value.reshape({slice.numel()})); });
    out.emplace_back(t.name, value);
  }
  fs::create_directories(directory);
  write_safetensors(directory / "model.safetensors", out, {{"format", "pt"}});
  const std::string text = p.config.dump(2) + "\n";
  data::AtomicFileWriter file(directory / "config.json");
  file.write(text.data(), text.size());
  file.commit();
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
  if (std::find(kModelTypes.begin(), kModelTypes.end(), type) == kModelTypes.end()) {
    std::string known;
    for (size_t i = 0; i < kModelTypes.size(); ++i) {
      known += (i == 0 ? "" : i + 1 == kModelTypes.size() ? " and " : ", ") + kModelTypes[i];
    }
    throw std::runtime_error(config_path.string() + ": unknown model_type \"" + type + "\"; linea reads " + known);
  }
  const Plan p = plan(model.config());
  if (type != p.table.model_type) {
    throw std::runtime_error(config_path.string() + ": model_type \"" + type + "\", but the [model] config is a " +
                             p.table.model_type);
  }
  const SafetensorsFile file(directory / "model.safetensors");
  const std::vector<HfTensor> tensors = hf_tensors(model, p.table);
  Params& params = model.params().params();
  model.params().with_host_values([&] {
    for (const HfTensor& t : tensors) {
      if (!file.contains(t.name)) {
        throw std::runtime_error(file.path().string() + ": no tensor " + t.name + " (linea's " +
                                 linea_names(t, params) + ")");
      }
      if (file.shape(t.name) != t.shape) {
        throw std::runtime_error(file.path().string() + ": tensor " + t.name + " is " +
                                 shape_string(file.shape(t.name)) + ", the model's " + linea_names(t, params) +
                                 (t.parts.size() > 1 ? " need " : " needs ") + shape_string(t.shape));
      }
      const Tensor value = file.read_f32(t.name);
      for_each_part(t, params, value.reshape({value.numel()}),
                    [&](size_t i, const Tensor& slice) { params[i].value.copy_from(slice.reshape(params[i].shape)); });
    }
  });
}

}  // namespace linea::inference
