// fla's table of the GLA family (inference/hf_tables.h; fla's layers GatedLinearAttention,
// MultiScaleRetention, HGRN2Attention, Mamba2 and their models):
//
//   gla     q_proj, k_proj, v_proj, q/k/v_conv1d (conv > 0; fla's [C, 1, W]), gk_proj.0, gk_proj.1
//           (+ .bias), g_proj, o_proj as linea's; the per-head norm γ is fla's g_norm_swish_gate
//           (FusedRMSNormGated, the output gate's norm when fuse_norm and hidden_act swish, as
//           written here), g_norm without an output gate. fla's model passes no gate_low_rank_dim
//           nor gate_logit_normalizer: both stay at 16.
//   retnet  q_proj, k_proj, v_proj, q/k/v_conv1d (conv > 0), g_proj, o_proj; g_norm →
//           g_norm_swish_gate. fla's RoPE base is fixed at 10000; the decays log(1 − 2^{−5−h}) and
//           the scale 1/√d_k are both's.
//   hgrn2   q_proj, f_proj, i_proj, g_norm (over all d_model channels), o_proj as linea's; the
//           lower bounds Γ [layers, hidden_size] are model.lower_bounds (linea's hgrn2.lower_bounds,
//           [layers, heads·expand_ratio]: equal when expand_ratio divides d_model). fla's heads are
//           hidden_size // expand_ratio.
//   mamba2  fla's in_proj is linea's z_proj, x_proj, B_proj, C_proj, dt_proj stacked (rows d_in,
//           d_in, N, N, H) and its conv1d (weight [d_in + 2N, 1, W], bias) linea's x_conv1d,
//           B_conv1d, C_conv1d; A_log, dt_bias (Δ = softplus(dt + dt_bias), decay exp(−e^A_log Δ)
//           in both), D [H], norm (RMSNormGated after the gate, over d_in) and out_proj as linea's.
//           fla's Mamba-2 blocks are a norm and the mixer alone (model.mlp = false) and its model
//           has no hybrid attn block.
// fla's RWKV-6 model wraps the layer in LayerNorm blocks with RWKV's channel mix, which no linea
// model has, so rwkv6 is refused.
#include <string>

#include "inference/hf_tables.h"
#include "model/mixers/gla/gla_configs.h"

namespace linea::inference::hf {

namespace {

// The keys fla's GLA and RetNet configs share: heads and widths, the short convs (conv > 0), no
// MQA or feature map.
nlohmann::json head_keys(const HeadWidths& w, int64_t conv, int64_t d_model) {
  return {{"num_heads", w.heads},
          {"expand_k", double(w.heads * w.d_k) / double(d_model)},
          {"expand_v", double(w.heads * w.d_v) / double(d_model)},
          {"num_kv_heads", nullptr},
          {"feature_map", nullptr},
          {"use_short_conv", conv > 0},
          {"conv_size", conv > 0 ? conv : 4},
          {"elementwise_affine", true},
          {"attn_mode", "chunk"}};
}

MixerTable gla(const ModelConfig& c, const GlaConfig& g) {
  const std::string section = g.section + ".";
  if (g.gate_rank != 16) {
    cannot(section + "gate_rank", "fla's GLA model has gate_low_rank_dim 16 (GLAConfig has no key for it), this one " +
                                      std::to_string(g.gate_rank));
  }
  if (g.gate_normalizer != 16.0) {
    cannot(section + "gate_normalizer",
           "fla's GLA model has gate_logit_normalizer 16 (GLAConfig has no key for it), this one " +
               nlohmann::json(g.gate_normalizer).dump());
  }
  MixerTable t;
  t.model_type = "gla";
  t.keys = head_keys(g.widths, g.conv, c.d_model);
  t.keys.update({{"use_output_gate", g.output_gate}, {"clamp_min", nullptr}, {"use_gk", true}, {"use_gv", false}});
  if (g.output_gate) t.layer = {{"g_norm_swish_gate.weight", {"g_norm.weight"}}};
  return t;
}

MixerTable retnet(const ModelConfig& c, const RetNetConfig& r) {
  if (r.rope_theta != 10000.0) {
    cannot(r.section + ".rope_theta",
           "fla's RetNet rotates with base 10000 (RetNetConfig has no key for it), this one " +
               nlohmann::json(r.rope_theta).dump());
  }
  MixerTable t;
  t.model_type = "retnet";
  t.keys = head_keys(r.widths, r.conv, c.d_model);
  t.keys["use_output_gate"] = true;
  t.layer = {{"g_norm_swish_gate.weight", {"g_norm.weight"}}};
  return t;
}

MixerTable hgrn2(const ModelConfig& c, const Hgrn2Config& h) {
  const std::string key = h.section + ".expand_ratio";
  if (c.d_model < h.expand_ratio) {
    cannot(key, "fla's HGRN-2 has hidden_size // expand_ratio heads, none at d_model " + std::to_string(c.d_model) +
                    " and expand_ratio " + std::to_string(h.expand_ratio));
  }
  if (h.lower_bound && h.heads * h.expand_ratio != c.d_model) {
    cannot(key, "fla's HGRN-2 lower bounds are [layers, hidden_size], which needs expand_ratio to divide d_model " +
                    std::to_string(c.d_model) + ", not " + std::to_string(h.expand_ratio));
  }
  MixerTable t;
  t.model_type = "hgrn2";
  t.keys = {{"num_heads", h.heads},       {"expand_ratio", h.expand_ratio},
            {"use_short_conv", false},    {"use_lower_bound", h.lower_bound},
            {"elementwise_affine", true}, {"attn_mode", "chunk"}};
  return t;
}

MixerTable mamba2(const Mamba2Config& m) {
  MixerTable t;
  t.model_type = "mamba2";
  t.keys = {{"expand", m.expand},
            {"head_dim", m.head_dim},
            {"num_heads", m.heads},
            {"state_size", m.state_size},
            {"n_groups", 1},
            {"conv_kernel", m.conv},
            {"use_conv_bias", true},
            {"use_bias", false},
            {"hidden_act", "silu"},
            {"rmsnorm", true},
            {"norm_before_gate", false},
            {"D_has_hdim", false},
            {"residual_in_fp32", true},
            {"chunk_size", 256},
            {"dt_min", m.dt_min},
            {"dt_max", m.dt_max},
            {"dt_init_floor", m.dt_floor}};
  t.mlp = t.hybrid = false;
  t.backbone = true;
  t.layer = {{"in_proj.weight", {"z_proj.weight", "x_proj.weight", "B_proj.weight", "C_proj.weight", "dt_proj.weight"}},
             {"conv1d.weight", {"x_conv1d.weight", "B_conv1d.weight", "C_conv1d.weight"}},
             {"conv1d.bias", {"x_conv1d.bias", "B_conv1d.bias", "C_conv1d.bias"}}};
  return t;
}

}  // namespace

MixerTable gla_family_table(const ModelConfig& c, const std::string& mixer) {
  if (mixer == "gla") return gla(c, mixer_config<GlaConfig>(c, mixer));
  if (mixer == "retnet") return retnet(c, mixer_config<RetNetConfig>(c, mixer));
  if (mixer == "hgrn2") return hgrn2(c, mixer_config<Hgrn2Config>(c, mixer));
  if (mixer == "mamba2") return mamba2(mixer_config<Mamba2Config>(c, mixer));
  cannot("model.mixer", "'" + mixer +
                            "': fla's RWKV-6 model wraps each layer in LayerNorm blocks with RWKV's channel-mix "
                            "feed-forward (and a pre-norm at layer 0); linea's blocks have RMSNorm and a SwiGLU MLP, "
                            "so no linea RWKV-6 model has an fla equivalent");
}

}  // namespace linea::inference::hf
