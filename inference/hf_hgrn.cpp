// fla's table of HGRN (inference/hf_tables.h; fla's HGRNAttention and HGRN model): i_proj, f_proj,
// g_proj, g_norm (FusedRMSNormGated over all expand_ratio·d_model channels, silu gate) and o_proj
// as linea's; the lower bounds Γ are model.lower_bounds (linea's hgrn.lower_bounds). fla's are
// [layers, hidden_size] whatever expand_ratio is, so with lower bounds fla's HGRN takes only
// expand_ratio 1.
#include <string>

#include "inference/hf_tables.h"
#include "model/mixers/hgrn/hgrn_config.h"

namespace linea::inference::hf {

MixerTable hgrn_table(const ModelConfig& c, const std::string& mixer) {
  const HgrnConfig& h = mixer_config<HgrnConfig>(c, mixer);
  if (h.lower_bound && h.expand_ratio != 1) {
    cannot(h.section + ".expand_ratio",
           "fla's HGRN lower bounds are [layers, hidden_size], so with lower bounds fla takes expand_ratio 1, not " +
               std::to_string(h.expand_ratio));
  }
  MixerTable t;
  t.model_type = "hgrn";
  t.keys = {{"expand_ratio", h.expand_ratio},
            {"use_short_conv", false},
            {"use_lower_bound", h.lower_bound},
            {"elementwise_affine", true},
            {"attn_mode", "fused_recurrent"}};
  return t;
}

}  // namespace linea::inference::hf
