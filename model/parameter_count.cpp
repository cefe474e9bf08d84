#include "model/parameter_count.h"

#include <algorithm>
#include <cstdio>

#include "model/mixer_registry.h"
#include "model/model.h"

namespace linea {

namespace {

constexpr ParamRole kRoles[] = {ParamRole::matrix, ParamRole::embedding, ParamRole::head,
                                ParamRole::vector, ParamRole::gate,      ParamRole::conv};

// embedding, head, the mixer families' groups (alphabetical: attention, linear mixers), mlp, norms.
std::vector<std::string> group_names() {
  std::vector<std::string> mixers;
  for (const MixerFamily* family : mixer_families()) {
    const std::string group(family->parameter_group());
    if (std::find(mixers.begin(), mixers.end(), group) == mixers.end()) mixers.push_back(group);
  }
  std::sort(mixers.begin(), mixers.end());
  std::vector<std::string> names = {"embedding", "head"};
  names.insert(names.end(), mixers.begin(), mixers.end());
  names.insert(names.end(), {"mlp", "norms"});
  return names;
}

// "layers.{i}.mixer.*" → the group of layer i's mixer family; "layers.{i}.mlp.*" → mlp; other
// "layers.*", "norm.*" → norms.
std::string_view group_of(const Parameter& p, const ModelConfig& config) {
  if (p.name.rfind("embedding.", 0) == 0) return "embedding";
  if (p.name.rfind("head.", 0) == 0) return "head";
  if (p.name.rfind("layers.", 0) == 0) {
    const size_t dot = p.name.find('.', 7);
    const int64_t layer = std::stoll(p.name.substr(7, dot - 7));
    const std::string_view rest = std::string_view(p.name).substr(dot + 1);
    if (rest.rfind("mixer.", 0) == 0) {
      return mixer_family(config.layer_mixers.at(static_cast<size_t>(layer))).parameter_group();
    }
    if (rest.rfind("mlp.", 0) == 0) return "mlp";
  }
  return "norms";
}

void append_row(std::string& out, const char* label, int64_t tensors, int64_t count, int64_t total) {
  char line[160];
  std::snprintf(line, sizeof line, "  %-16s %8lld %16lld %10.2fM %7.2f%%\n", label, static_cast<long long>(tensors),
                static_cast<long long>(count), count / 1e6, total ? 100.0 * count / total : 0.0);
  out += line;
}

// "6 attention: 3:1" (mixer and hybrid), or the layers of each mixer ("18 gdn, 6 attention").
std::string layers_description(const ModelConfig& config) {
  if (config.layer_mixers_terms.empty()) {
    return std::to_string(config.attention_layers.size()) + " attention: " + config.hybrid;
  }
  std::string s;
  for (const std::string& mixer : config.distinct_mixers()) {
    const auto n = std::count(config.layer_mixers.begin(), config.layer_mixers.end(), mixer);
    s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + mixer;
  }
  return s;
}

}  // namespace

int64_t ParameterCount::group(std::string_view name) const {
  for (const Entry& e : groups) {
    if (e.name == name) return e.count;
  }
  return 0;
}

ParameterCount count_parameters(const ModelConfig& config) {
  const Model model(config, DType::f32, /*allocate=*/false);
  ParameterCount result;
  for (const std::string& name : group_names()) result.groups.push_back({name, 0, 0});
  for (ParamRole role : kRoles) result.roles.push_back({std::string(param_role_name(role)), 0, 0});
  for (const Parameter& p : model.params().params()) {
    const int64_t n = shape_numel(p.shape);
    const std::string_view group = group_of(p, model.config());
    ParameterCount::Entry& g = *std::find_if(result.groups.begin(), result.groups.end(),
                                             [&](const ParameterCount::Entry& e) { return e.name == group; });
    ++g.tensors;
    g.count += n;
    ParameterCount::Entry& r = result.roles[static_cast<size_t>(p.role)];
    ++r.tensors;
    r.count += n;
    result.total += n;
  }
  result.non_embedding = result.total - result.group("embedding") - result.group("head");
  return result;
}

std::string format_parameter_count(const ModelConfig& config, const ParameterCount& count) {
  std::string out;
  char line[200];
  std::snprintf(line, sizeof line, "model: %s, d_model %lld, %lld layers (%s), vocab %lld%s\n",
                config.mixers_description().c_str(), static_cast<long long>(config.d_model),
                static_cast<long long>(config.layers), layers_description(config).c_str(),
                static_cast<long long>(config.vocab), config.tie_embeddings ? ", tied embeddings" : "");
  out += line;
  std::snprintf(line, sizeof line, "\n  %-16s %8s %16s %11s %8s\n", "group", "tensors", "parameters", "millions",
                "share");
  out += line;
  for (const auto& g : count.groups) append_row(out, g.name.c_str(), g.tensors, g.count, count.total);
  std::snprintf(line, sizeof line, "\n  %-16s %8s %16s %11s %8s\n", "optimizer role", "tensors", "parameters",
                "millions", "share");
  out += line;
  for (const auto& r : count.roles) append_row(out, r.name.c_str(), r.tensors, r.count, count.total);
  out += "\n";
  int64_t tensors = 0;
  for (const auto& g : count.groups) tensors += g.tensors;
  append_row(out, "total", tensors, count.total, count.total);
  int64_t embedding_tensors = 0;
  for (const auto& g : count.groups) {
    if (g.name == "embedding" || g.name == "head") embedding_tensors += g.tensors;
  }
  append_row(out, "non-embedding", tensors - embedding_tensors, count.non_embedding, count.total);
  return out;
}

}  // namespace linea
