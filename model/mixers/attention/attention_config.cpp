#include "model/mixers/attention/attention_config.h"

#include <algorithm>

#include "data/config_reader.h"

namespace linea {

void AttentionConfig::read(ConfigSection& table) {
  heads = table.integer("heads", heads);
  kv_heads = table.integer("kv_heads", kv_heads);
  head_dim = table.integer("head_dim", head_dim);
  window = table.integer("window", window);
  rope_theta = table.number("rope_theta", rope_theta);
  const std::string name = table.choice("backend", "auto", {"auto", "cudnn", "own"});
  backend = name == "cudnn" ? ops::AttentionBackend::cudnn
            : name == "own" ? ops::AttentionBackend::own
                            : ops::AttentionBackend::automatic;
  cudnn_autotune = table.boolean("cudnn_autotune", cudnn_autotune);
}

void AttentionConfig::resolve(int64_t d_model, const ConfigFieldError& fail) {
  fail.at_least("heads", heads, 0);
  fail.at_least("head_dim", head_dim, 0);
  if (heads == 0 && head_dim == 0) head_dim = std::min<int64_t>(64, d_model);
  if (heads == 0) {
    if (d_model % head_dim) {
      fail("head_dim", "d_model " + std::to_string(d_model) + " is not divisible by head_dim " +
                           std::to_string(head_dim) + "; set " + section + ".heads");
    }
    heads = d_model / head_dim;
  }
  if (head_dim == 0) head_dim = fail.d_model_per_head(d_model, heads, "head_dim");
  if (head_dim % 2) fail("head_dim", "RoPE needs an even head_dim, got " + std::to_string(head_dim));
  if (kv_heads == 0) kv_heads = heads;
  fail.at_least("kv_heads", kv_heads, 1);
  if (heads % kv_heads) {
    fail("kv_heads", "heads " + std::to_string(heads) + " is not a multiple of kv_heads " + std::to_string(kv_heads));
  }
  fail.at_least("window", window, 0);
  if (!(rope_theta > 0)) fail("rope_theta", "expected a positive number, got " + std::to_string(rope_theta));
}

}  // namespace linea
