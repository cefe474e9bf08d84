#include "model/parameter_count.h"

#include <cstdio>

#include "model/model.h"

namespace linea {

namespace {

constexpr ParamRole kRoles[] = {ParamRole::matrix, ParamRole::embedding, ParamRole::head,
                                ParamRole::vector, ParamRole::gate,      ParamRole::conv};
enum Group { embedding, head, attention, linear_mixers, mlp, norms, group_count };
constexpr const char* kGroupNames[group_count] = {"embedding", "head", "attention", "linear mixers", "mlp", "norms"};

// "layers.{i}.mixer.*" → mixer of layer i; "layers.{i}.mlp.*" → mlp; other "layers.*", "norm.*" → norms.
Group group_of(const Parameter& p, const ModelConfig& config) {
  if (p.name.rfind("embedding.", 0) == 0) return embedding;
  if (p.name.rfind("head.", 0) == 0) return head;
  if (p.name.rfind("layers.", 0) == 0) {
    const size_t dot = p.name.find('.', 7);
    const int64_t layer = std::stoll(p.name.substr(7, dot - 7));
    const std::string_view rest = std::string_view(p.name).substr(dot + 1);
    if (rest.rfind("mixer.", 0) == 0) return config.is_attention_layer(layer) ? attention : linear_mixers;
    if (rest.rfind("mlp.", 0) == 0) return mlp;
  }
  return norms;
}

void append_row(std::string& out, const char* label, int64_t tensors, int64_t count, int64_t total) {
  char line[160];
  std::snprintf(line, sizeof line, "  %-16s %8lld %16lld %10.2fM %7.2f%%\n", label, static_cast<long long>(tensors),
                static_cast<long long>(count), count / 1e6, total ? 100.0 * count / total : 0.0);
  out += line;
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
  for (int g = 0; g < group_count; ++g) result.groups.push_back({kGroupNames[g], 0, 0});
  for (ParamRole role : kRoles) result.roles.push_back({std::string(param_role_name(role)), 0, 0});
  for (const Parameter& p : model.params().params()) {
    const int64_t n = shape_numel(p.shape);
    ParameterCount::Entry& g = result.groups[group_of(p, model.config())];
    ++g.tensors;
    g.count += n;
    ParameterCount::Entry& r = result.roles[static_cast<size_t>(p.role)];
    ++r.tensors;
    r.count += n;
    result.total += n;
  }
  result.non_embedding = result.total - result.groups[embedding].count - result.groups[head].count;
  return result;
}

std::string format_parameter_count(const ModelConfig& config, const ParameterCount& count) {
  std::string out;
  char line[200];
  std::snprintf(line, sizeof line, "model: %s, d_model %lld, %lld layers (%zu attention: %s), vocab %lld%s\n",
                std::string(mixer_kind_name(config.mixer)).c_str(), static_cast<long long>(config.d_model),
                static_cast<long long>(config.layers), config.attention_layers.size(), config.hybrid.c_str(),
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
  append_row(out, "non-embedding", tensors - count.groups[embedding].tensors - count.groups[head].tensors,
             count.non_embedding, count.total);
  return out;
}

}  // namespace linea
