#include "model/model_config.h"

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include "model/mixer_registry.h"

namespace linea {

namespace {

// The name of the softmax mixer that model.hybrid places.
constexpr std::string_view kHybridAttention = "attention";

std::string list_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// "a,b , c" → {"a", "b", "c"}
std::vector<std::string> split_terms(std::string_view text) {
  std::vector<std::string> terms;
  size_t begin = 0;
  while (true) {
    const size_t comma = text.find(',', begin);
    std::string_view term =
        text.substr(begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin);
    while (!term.empty() && term.front() == ' ') term.remove_prefix(1);
    while (!term.empty() && term.back() == ' ') term.remove_suffix(1);
    terms.emplace_back(term);
    if (comma == std::string_view::npos) return terms;
    begin = comma + 1;
  }
}

// The table of `config` relative to the [model] section ("model.linear" → "linear").
std::string relative_table(const std::string& section) {
  const std::string prefix = "model.";
  return section.rfind(prefix, 0) == 0 ? section.substr(prefix.size()) : section;
}

// The registry position of a mixer's family (configs are resolved family by family, in that order).
size_t family_index(std::string_view mixer) {
  const auto& families = mixer_families();
  return static_cast<size_t>(std::find(families.begin(), families.end(), &mixer_family(mixer)) - families.begin());
}

}  // namespace

// ---- MixerConfigSet ----------------------------------------------------------------------------

MixerConfigSet::MixerConfigSet(const MixerConfigSet& other) { *this = other; }

MixerConfigSet& MixerConfigSet::operator=(const MixerConfigSet& other) {
  if (this == &other) return *this;
  configs_.clear();
  for (const auto& c : other.configs_) configs_.push_back(c->clone());
  return *this;
}

MixerConfig* MixerConfigSet::find(std::string_view mixer) {
  for (const auto& c : configs_) {
    if (c->mixer == mixer) return c.get();
  }
  return nullptr;
}

const MixerConfig* MixerConfigSet::find(std::string_view mixer) const {
  return const_cast<MixerConfigSet*>(this)->find(mixer);
}

MixerConfig& MixerConfigSet::get(std::string_view mixer) {
  if (MixerConfig* c = find(mixer)) return *c;
  const MixerFamily& family = mixer_family(mixer);
  put(family.make_config(mixer, "model." + std::string(family.shared_section())));
  return *find(mixer);
}

void MixerConfigSet::put(std::unique_ptr<MixerConfig> config) {
  for (auto& c : configs_) {
    if (c->mixer == config->mixer) {
      c = std::move(config);
      return;
    }
  }
  configs_.push_back(std::move(config));
}

// ---- ConfigFieldError --------------------------------------------------------------------------

void ConfigFieldError::operator()(std::string_view key, const std::string& message) const {
  if (table) table->fail(key, message);
  throw std::invalid_argument("ModelConfig: " + section + "." + std::string(key) + ": " + message);
}

void ConfigFieldError::at_least(std::string_view key, int64_t value, int64_t min) const {
  if (value < min) (*this)(key, "expected an integer >= " + std::to_string(min) + ", got " + std::to_string(value));
}

int64_t ConfigFieldError::d_model_per_head(int64_t d_model, int64_t heads, std::string_view width_key) const {
  if (d_model % heads) {
    (*this)("heads", "d_model " + std::to_string(d_model) + " is not divisible by " + std::to_string(heads) +
                         " heads; set " + section + "." + std::string(width_key));
  }
  return d_model / heads;
}

// ---- layouts -----------------------------------------------------------------------------------

int64_t default_mlp_hidden(int64_t d_model) {
  const int64_t hidden = d_model * 8 / 3;  // int(d · 4 · 2/3)
  return 256 * ((hidden + 255) / 256);
}

std::vector<int64_t> hybrid_attention_layers(std::string_view rule, int64_t layers) {
  if (rule == "pure") return {};
  const auto malformed = [&] {
    return std::invalid_argument(
        "expected \"pure\", a ratio \"r:1\" (e.g. \"3:1\") or a list of attention layer "
        "indices; got '" +
        std::string(rule) + "'");
  };
  const size_t colon = rule.find(':');
  if (colon == std::string_view::npos || rule.substr(colon + 1) != "1") throw malformed();
  int64_t r = 0;
  const char* begin = rule.data();
  const char* end = rule.data() + colon;
  const auto [ptr, ec] = std::from_chars(begin, end, r);
  if (ec != std::errc() || ptr != end || r < 1) throw malformed();
  if (r + 1 > layers) return {layers - 1};  // shorter than one group: the stack is one group
  std::vector<int64_t> indices;
  for (int64_t i = r; i < layers; i += r + 1) indices.push_back(i);
  return indices;
}

std::vector<std::string> expand_layer_mixers(const std::vector<std::string>& terms, bool repeat, int64_t layers) {
  if (terms.empty()) throw std::invalid_argument("expected at least one mixer");
  std::vector<std::string> pattern;
  for (const std::string& term : terms) {
    const size_t star = term.find('*');
    int64_t count = 1;
    std::string name = term;
    if (star != std::string::npos) {
      const auto [ptr, ec] = std::from_chars(term.data(), term.data() + star, count);
      if (ec != std::errc() || ptr != term.data() + star || count < 1) {
        throw std::invalid_argument("term '" + term + "': expected \"name\" or \"N*name\" with N ≥ 1");
      }
      name = term.substr(star + 1);
    }
    if (!find_mixer_family(name)) {
      throw std::invalid_argument("term '" + term + "': unknown mixer '" + name + "'; expected one of " +
                                  join_names(mixer_names(), ", "));
    }
    pattern.insert(pattern.end(), static_cast<size_t>(count), name);
  }
  const int64_t length = static_cast<int64_t>(pattern.size());
  if (!repeat && length != layers) {
    throw std::invalid_argument("a list names one mixer per layer: " + std::to_string(length) + " mixers for " +
                                std::to_string(layers) + " layers");
  }
  if (repeat && layers % length) {
    throw std::invalid_argument("the pattern covers " + std::to_string(length) + " layers, which does not divide " +
                                std::to_string(layers) + " layers");
  }
  std::vector<std::string> mixers;
  for (int64_t i = 0; i < layers; ++i) mixers.push_back(pattern[static_cast<size_t>(i % length)]);
  return mixers;
}

// ---- ModelConfig -------------------------------------------------------------------------------

ModelConfig ModelConfig::parse(ConfigSection model) {
  ModelConfig c;
  // Ranges checked here too (not only in resolve()): the layer layout below needs a valid depth.
  c.d_model = model.required_integer("d_model", 1);
  c.layers = model.required_integer("layers", 1);
  c.vocab = model.required_integer("vocab", 2);
  if (model.has("layer_mixers")) {
    if (model.has("mixer") || model.has("hybrid")) {
      model.fail("layer_mixers", "give either layer_mixers or mixer (and hybrid), not both");
    }
    c.layer_mixers_repeat = !model.is_array("layer_mixers");
    c.layer_mixers_terms =
        c.layer_mixers_repeat ? split_terms(model.string("layer_mixers", "")) : model.string_list("layer_mixers", {});
    c.mixer.clear();
  } else {
    c.mixer = model.required_choice("mixer", mixer_names());
    if (model.is_array("hybrid")) {
      c.attention_layers = model.integer_list("hybrid", {});
      c.hybrid = list_string(c.attention_layers);
    } else {
      c.hybrid = model.string("hybrid", c.hybrid);
      if (c.mixer != kHybridAttention) {
        try {
          c.attention_layers = hybrid_attention_layers(c.hybrid, c.layers);
        } catch (const std::invalid_argument& e) {
          model.fail("hybrid", e.what());
        }
      }
    }
  }
  c.tie_embeddings = model.boolean("tie_embeddings", c.tie_embeddings);
  c.mlp_hidden = model.integer("mlp_hidden", c.mlp_hidden);
  c.mlp = model.boolean("mlp", c.mlp);
  c.norm_eps = model.number("norm_eps", c.norm_eps);
  c.init_std = model.number("init_std", c.init_std);
  c.init_from = model.string("init_from", c.init_from);
  if (!c.init_from.empty() && (c.init_from.rfind("hf:", 0) != 0 || c.init_from.size() == 3)) {
    model.fail("init_from",
               "expected \"hf:DIR\" (an fla / Hugging Face checkpoint directory), got \"" + c.init_from + "\"");
  }

  // The layers' mixers first (their errors name model.hybrid or model.layer_mixers), then each
  // mixer's config: from [model.<mixer>] when the config has that table, else from its family's
  // shared table. Every shared table and every [model.<mixer>] table is read whether or not a
  // layer uses it (with the family's default mixer's defaults), so that switching mixers on the
  // command line leaves no key unread.
  c.resolve_layer_mixers(&model);
  const std::vector<std::string> used = c.distinct_mixers();
  for (const MixerFamily* family : mixer_families()) {
    const std::string shared(family->shared_section());
    bool shared_read = false;
    for (const std::string& mixer : family->mixers()) {
      const bool own = model.has(mixer);
      const bool in_use = std::find(used.begin(), used.end(), mixer) != used.end();
      if (!own && !in_use) continue;
      const std::string table = own ? mixer : shared;
      shared_read = shared_read || !own;
      ConfigSection section = model.section(table);
      std::unique_ptr<MixerConfig> config = family->make_config(mixer, section.path());
      config->read(section);
      if (in_use) c.mixer_configs.put(std::move(config));
    }
    if (!shared_read) {
      ConfigSection section = model.section(shared);
      family->make_config(family->default_mixer(), section.path())->read(section);
    }
  }
  ConfigSection routing = model.section("routing");
  c.routing.read(routing);
  c.resolve(&model);
  return c;
}

void ModelConfig::resolve_layer_mixers(const ConfigSection* section) {
  const ConfigFieldError fail{section, "model"};
  if (!layer_mixers_terms.empty()) {
    try {
      layer_mixers = expand_layer_mixers(layer_mixers_terms, layer_mixers_repeat, layers);
    } catch (const std::invalid_argument& e) {
      fail("layer_mixers", e.what());
    }
    return;
  }
  if (!find_mixer_family(mixer)) {
    fail("mixer", "unknown mixer '" + mixer + "'; expected one of " + join_names(mixer_names(), ", "));
  }
  if (mixer == kHybridAttention) {
    if (hybrid != "pure") fail("hybrid", "a hybrid layout needs a linear mixer, but mixer = attention");
    attention_layers.resize(static_cast<size_t>(layers));
    for (int64_t i = 0; i < layers; ++i) attention_layers[static_cast<size_t>(i)] = i;
  }
  std::sort(attention_layers.begin(), attention_layers.end());
  for (size_t i = 0; i < attention_layers.size(); ++i) {
    const int64_t layer = attention_layers[i];
    if (layer < 0 || layer >= layers) {
      fail("hybrid", "attention layer " + std::to_string(layer) + " is outside [0, " + std::to_string(layers) + ")");
    }
    if (i > 0 && attention_layers[i - 1] == layer) {
      fail("hybrid", "attention layer " + std::to_string(layer) + " is listed twice");
    }
  }
  layer_mixers.assign(static_cast<size_t>(layers), mixer);
  for (const int64_t layer : attention_layers) layer_mixers[static_cast<size_t>(layer)] = kHybridAttention;
}

void ModelConfig::resolve(const ConfigSection* section) {
  const ConfigFieldError fail{section, "model"};
  fail.at_least("d_model", d_model, 1);
  fail.at_least("layers", layers, 1);
  fail.at_least("vocab", vocab, 2);
  fail.at_least("mlp_hidden", mlp_hidden, 0);
  if (!(norm_eps > 0)) fail("norm_eps", "expected a positive number, got " + std::to_string(norm_eps));
  if (!(init_std > 0)) fail("init_std", "expected a positive number, got " + std::to_string(init_std));
  if (mlp_hidden == 0) mlp_hidden = default_mlp_hidden(d_model);

  resolve_layer_mixers(section);
  // Each mixer's config, family by family in the registry's order.
  std::vector<std::string> used = distinct_mixers();
  std::stable_sort(used.begin(), used.end(),
                   [](const std::string& a, const std::string& b) { return family_index(a) < family_index(b); });
  for (const std::string& mixer : used) {
    MixerConfig& config = mixer_configs.get(mixer);
    if (section) {
      const ConfigSection table = section->section(relative_table(config.section));
      config.resolve(d_model, ConfigFieldError{&table, config.section});
    } else {
      config.resolve(d_model, ConfigFieldError{nullptr, config.section});
    }
  }
  // Routing joins the layers whose family routes (the delta rule's); the others are skipped.
  std::vector<bool> routes(layer_mixers.size());
  for (size_t i = 0; i < layer_mixers.size(); ++i) routes[i] = mixer_family(layer_mixers[i]).routes();
  if (section) {
    const ConfigSection table = section->section("routing");
    routing.resolve(routes, ConfigFieldError{&table, "model.routing"});
  } else {
    routing.resolve(routes, ConfigFieldError{nullptr, "model.routing"});
  }
}

const MixerConfig& ModelConfig::layer_config(int64_t layer) const {
  const std::string& name = layer_mixers.at(static_cast<size_t>(layer));
  const MixerConfig* config = mixer_configs.find(name);
  if (!config) throw std::logic_error("ModelConfig: no config for mixer '" + name + "' (resolve() first)");
  return *config;
}

std::vector<std::string> ModelConfig::distinct_mixers() const {
  std::vector<std::string> names;
  for (const std::string& m : layer_mixers) {
    if (std::find(names.begin(), names.end(), m) == names.end()) names.push_back(m);
  }
  return names;
}

std::string ModelConfig::mixers_description() const {
  if (layer_mixers_terms.empty()) return mixer;
  std::string s;
  for (const std::string& term : layer_mixers_terms) s += (s.empty() ? "" : ",") + term;
  return s;
}

}  // namespace linea
