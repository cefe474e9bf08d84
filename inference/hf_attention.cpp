// fla's table of softmax attention (inference/hf_tables.h): attention alone is fla's transformer,
// and attention layers among linear ones its hybrid `attn` block. linea's names are fla's (q_proj,
// k_proj, v_proj, o_proj; no biases), so nothing is renamed. fla derives head_dim = hidden_size /
// num_heads, so any other head_dim is refused; no window is fla's window_size null.
#include <string>

#include "inference/hf_tables.h"
#include "model/mixers/attention/attention_config.h"

namespace linea::inference::hf {

namespace {

const AttentionConfig& checked_attention(const ModelConfig& c) {
  const AttentionConfig& a = mixer_config<AttentionConfig>(c, "attention");
  if (a.heads * a.head_dim != c.d_model) {
    cannot("model.attention.head_dim",
           "fla's attention has head_dim = hidden_size / num_heads = " + std::to_string(c.d_model / a.heads) +
               ", this one " + std::to_string(a.head_dim));
  }
  return a;
}

nlohmann::json window(const AttentionConfig& a) { return a.window > 0 ? nlohmann::json(a.window) : nullptr; }

}  // namespace

MixerTable transformer_table(const ModelConfig& c) {
  const AttentionConfig& a = checked_attention(c);
  MixerTable t;
  t.model_type = "transformer";
  t.keys = {
      {"num_heads", a.heads}, {"num_kv_heads", a.kv_heads}, {"window_size", window(a)}, {"rope_theta", a.rope_theta}};
  return t;
}

nlohmann::json attention_block(const ModelConfig& c, const std::vector<int64_t>& layers) {
  const AttentionConfig& a = checked_attention(c);
  return {{"layers", layers},  {"num_heads", a.heads},     {"num_kv_heads", a.kv_heads},
          {"qkv_bias", false}, {"window_size", window(a)}, {"rope_theta", a.rope_theta}};
}

}  // namespace linea::inference::hf
