#include "worker/model_config.h"

#include <algorithm>
#include <charconv>
#include <stdexcept>

namespace linea {

namespace {

MixerKind mixer_from_name(std::string_view name) {
  if (name == "deltanet") return MixerKind::deltanet;
  if (name == "gdn") return MixerKind::gdn;
  if (name == "kda") return MixerKind::kda;
  if (name == "gdn2") return MixerKind::gdn2;
  return MixerKind::attention;
}

// Throws "SOURCE: model.KEY: message", through the config section when there is one (which adds
// the file name and any command-line override that set the key).
struct ConfigError {
  const ConfigSection* section;
  [[noreturn]] void operator()(std::string_view key, const std::string& message) const {
    if (section) section->fail(key, message);
    throw std::invalid_argument("ModelConfig: model." + std::string(key) + ": " + message);
  }
};

std::string list_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

std::string_view mixer_kind_name(MixerKind kind) {
  switch (kind) {
    case MixerKind::deltanet: return "deltanet";
    case MixerKind::gdn: return "gdn";
    case MixerKind::kda: return "kda";
    case MixerKind::gdn2: return "gdn2";
    case MixerKind::attention: return "attention";
  }
  return "?";
}

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

ModelConfig ModelConfig::parse(ConfigSection model) {
  ModelConfig c;
  // Ranges checked here too (not only in resolve()): the hybrid rule below needs a valid depth.
  c.d_model = model.required_integer("d_model", 1);
  c.layers = model.required_integer("layers", 1);
  c.vocab = model.required_integer("vocab", 2);
  c.mixer = mixer_from_name(model.required_choice("mixer", {"deltanet", "gdn", "kda", "gdn2", "attention"}));
  c.tie_embeddings = model.boolean("tie_embeddings", c.tie_embeddings);
  c.mlp_hidden = model.integer("mlp_hidden", c.mlp_hidden);
  c.norm_eps = model.number("norm_eps", c.norm_eps);
  c.init_std = model.number("init_std", c.init_std);
  if (model.is_array("hybrid")) {
    c.attention_layers = model.integer_list("hybrid", {});
    c.hybrid = list_string(c.attention_layers);
  } else {
    c.hybrid = model.string("hybrid", c.hybrid);
    if (c.mixer != MixerKind::attention) {
      try {
        c.attention_layers = hybrid_attention_layers(c.hybrid, c.layers);
      } catch (const std::invalid_argument& e) {
        model.fail("hybrid", e.what());
      }
    }
  }

  // Both sub-tables are always read, so that switching `model.mixer` on the command line leaves
  // no key unread.
  ConfigSection linear = model.section("linear");
  LinearMixerConfig& l = c.linear;
  l.heads = linear.integer("heads", l.heads);
  l.d_k = linear.integer("d_k", l.d_k);
  l.d_v = linear.integer("d_v", l.d_v);
  l.conv = linear.integer("conv", l.conv);
  l.output_gate = linear.boolean("output_gate", c.mixer != MixerKind::deltanet);
  l.allow_neg_eigval = linear.boolean("allow_neg_eigval", l.allow_neg_eigval);
  l.decay_rank = linear.integer("decay_rank", l.decay_rank);
  l.gate_rank = linear.integer("gate_rank", l.gate_rank);

  ConfigSection attention = model.section("attention");
  AttentionConfig& a = c.attention;
  a.heads = attention.integer("heads", a.heads);
  a.kv_heads = attention.integer("kv_heads", a.kv_heads);
  a.head_dim = attention.integer("head_dim", a.head_dim);
  a.window = attention.integer("window", a.window);
  a.rope_theta = attention.number("rope_theta", a.rope_theta);

  c.resolve(&model);
  return c;
}

void ModelConfig::resolve(const ConfigSection* section) {
  const ConfigError fail{section};
  const auto at_least = [&](std::string_view key, int64_t value, int64_t min) {
    if (value < min) fail(key, "expected an integer >= " + std::to_string(min) + ", got " + std::to_string(value));
  };
  at_least("d_model", d_model, 1);
  at_least("layers", layers, 1);
  at_least("vocab", vocab, 2);
  at_least("mlp_hidden", mlp_hidden, 0);
  if (!(norm_eps > 0)) fail("norm_eps", "expected a positive number, got " + std::to_string(norm_eps));
  if (!(init_std > 0)) fail("init_std", "expected a positive number, got " + std::to_string(init_std));
  if (mlp_hidden == 0) mlp_hidden = default_mlp_hidden(d_model);

  if (mixer == MixerKind::attention) {
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

  if (has_linear_layers()) {
    LinearMixerConfig& l = linear;
    at_least("linear.heads", l.heads, 1);
    if (l.d_k == 0) {
      if (d_model % l.heads) {
        fail("linear.heads", "d_model " + std::to_string(d_model) + " is not divisible by " + std::to_string(l.heads) +
                                 " heads; set model.linear.d_k");
      }
      l.d_k = d_model / l.heads;
    }
    at_least("linear.d_k", l.d_k, 1);
    if (l.d_v == 0) l.d_v = l.d_k;
    at_least("linear.d_v", l.d_v, 1);
    at_least("linear.conv", l.conv, 0);
    if (l.conv > 64) fail("linear.conv", "expected a kernel size in [0, 64], got " + std::to_string(l.conv));
    if (l.decay_rank == 0) l.decay_rank = l.d_v;
    if (l.gate_rank == 0) l.gate_rank = l.d_v;
    at_least("linear.decay_rank", l.decay_rank, 1);
    at_least("linear.gate_rank", l.gate_rank, 1);
  }

  if (has_attention_layers()) {
    AttentionConfig& a = attention;
    at_least("attention.heads", a.heads, 0);
    at_least("attention.head_dim", a.head_dim, 0);
    if (a.heads == 0 && a.head_dim == 0) a.head_dim = std::min<int64_t>(64, d_model);
    if (a.heads == 0) {
      if (d_model % a.head_dim) {
        fail("attention.head_dim", "d_model " + std::to_string(d_model) + " is not divisible by head_dim " +
                                       std::to_string(a.head_dim) + "; set model.attention.heads");
      }
      a.heads = d_model / a.head_dim;
    }
    if (a.head_dim == 0) {
      if (d_model % a.heads) {
        fail("attention.heads", "d_model " + std::to_string(d_model) + " is not divisible by " +
                                    std::to_string(a.heads) + " heads; set model.attention.head_dim");
      }
      a.head_dim = d_model / a.heads;
    }
    if (a.head_dim % 2) fail("attention.head_dim", "RoPE needs an even head_dim, got " + std::to_string(a.head_dim));
    if (a.kv_heads == 0) a.kv_heads = a.heads;
    at_least("attention.kv_heads", a.kv_heads, 1);
    if (a.heads % a.kv_heads) {
      fail("attention.kv_heads",
           "heads " + std::to_string(a.heads) + " is not a multiple of kv_heads " + std::to_string(a.kv_heads));
    }
    at_least("attention.window", a.window, 0);
    if (!(a.rope_theta > 0))
      fail("attention.rope_theta", "expected a positive number, got " + std::to_string(a.rope_theta));
  }
}

bool ModelConfig::is_attention_layer(int64_t layer) const {
  return std::binary_search(attention_layers.begin(), attention_layers.end(), layer);
}

bool ModelConfig::has_linear_layers() const { return static_cast<int64_t>(attention_layers.size()) < layers; }

}  // namespace linea
