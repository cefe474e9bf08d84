// fla's table of the delta-rule family (inference/hf_tables.h): deltanet → delta_net, gdn →
// gated_deltanet, kda → kda. linea's layers carry fla's parameter names (q/k/v_proj, b_proj, a_proj,
// A_log, dt_bias, g_proj, o_norm, o_proj, the q/k/v_conv1d; KDA's low-rank f_proj.0/1 and
// g_proj.0/1), so nothing is renamed; the convs take fla's [C, 1, W]. fla has a GDN-2 layer but no
// GDN-2 model type, so gdn2 is refused.
#include <string>

#include "inference/hf_tables.h"
#include "model/mixers/delta_rule/delta_rule_config.h"

namespace linea::inference::hf {

MixerTable delta_rule_table(const ModelConfig& c, const std::string& mixer) {
  if (mixer == "gdn2") {
    cannot("model.mixer",
           "'gdn2': fla has a GDN-2 layer (fla.layers.gdn2) but no GDN-2 model type, so no fla "
           "checkpoint can hold one");
  }
  const DeltaRuleConfig& d = mixer_config<DeltaRuleConfig>(c, mixer);
  MixerTable t;
  t.model_type = mixer == "deltanet" ? "delta_net" : mixer == "gdn" ? "gated_deltanet" : "kda";
  t.keys = {{"num_heads", d.heads},
            {"use_short_conv", d.conv > 0},
            {"conv_size", d.conv > 0 ? d.conv : 4},
            {"allow_neg_eigval", d.allow_neg_eigval},
            {"expand_v", double(d.d_v) / double(d.d_k)}};
  if (mixer == "deltanet") {
    t.keys.update({{"expand_k", double(d.heads * d.d_k) / double(c.d_model)},
                   {"expand_v", double(d.heads * d.d_v) / double(c.d_model)},
                   {"use_gate", d.output_gate},
                   {"use_beta", true},
                   {"use_output_norm", true},
                   {"qk_norm", "l2"},
                   {"qk_activation", "silu"}});
  } else {
    t.keys["head_dim"] = d.d_k;
  }
  if (mixer == "gdn") {
    if (!d.output_gate) cannot("model.gdn.output_gate", "fla's use_gate = false has no o_norm gate");
    t.keys["use_gate"] = true;
  }
  if (mixer == "kda" && (d.decay_rank != d.d_v || d.gate_rank != d.d_v || !d.output_gate)) {
    cannot("model.kda", "fla's KDA has decay_rank = gate_rank = d_v and an output gate");
  }
  return t;
}

}  // namespace linea::inference::hf
