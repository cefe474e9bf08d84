// DeltaRuleConfig: the settings of one delta-rule mixer (reference/mixers.md §1.1–§1.4), read from
// [model.<mixer>] or the family's shared table [model.linear]:
//   heads, d_k (default d_model/heads), d_v (default d_k), conv (kernel size, 0 = no conv),
//   output_gate (default: the preset's), allow_neg_eigval, decay_rank and gate_rank (the inner width
//   of KDA/GDN-2's low-rank decay and output-gate projections; 0 → d_v), recompute (false, the
//   default: the CUDA bf16 forward keeps its chunk intermediates and per-chunk states for the
//   backward (ops::delta_rule_saved_bytes: 1408 bytes per token and head at d_k = d_v = 128);
//   true: the backward recomputes them, less memory, more time; the CPU and f32 paths always
//   recompute).
// A preset fixes what the config does not: the decay kind, the gate kind and the output gate's
// activation. The family's presets are the mixers deltanet, gdn, kda and gdn2.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/ops.h"
#include "model/mixer_config.h"
#include "model/mixers/delta_rule/delta_rule.h"

namespace linea {

struct DeltaRulePreset {
  const char* name;
  ops::DecayKind decay;            // none (DeltaNet), scalar (GDN), channel (KDA, GDN-2)
  ops::GateKind gate;              // beta, or GDN-2's erase and write gates
  ops::GateActivation output_act;  // of the output gate when there is one: SiLU or sigmoid
  bool output_gate;                // whether there is one by default (DeltaNet: no)
};

// deltanet, gdn, kda, gdn2, in that order.
const std::vector<DeltaRulePreset>& delta_rule_presets();
// The preset named `name`; throws std::invalid_argument naming the presets otherwise.
const DeltaRulePreset& delta_rule_preset(std::string_view name);

class DeltaRuleConfig final : public MixerConfigOf<DeltaRuleConfig> {
 public:
  // The defaults of the preset `mixer`, read from `section` ("model.linear" by default).
  explicit DeltaRuleConfig(std::string_view mixer = "gdn", std::string section = "model.linear");

  void read(ConfigSection& table) override;
  void resolve(int64_t d_model, const ConfigFieldError& fail) override;

  // The op's decay and gate kinds, with fla's scale 1/sqrt(d_k).
  ops::DeltaRuleSpec spec() const;
  // The output gate's activation: the preset's, or none without output gate.
  ops::GateActivation output_activation() const;

  DeltaRulePreset preset;
  int64_t heads = 4;
  int64_t d_k = 0;  // 0 → d_model / heads
  int64_t d_v = 0;  // 0 → d_k
  int64_t conv = 4;
  bool output_gate = true;
  bool allow_neg_eigval = false;
  int64_t decay_rank = 0;  // KDA/GDN-2 f_proj: d → decay_rank → heads·d_k (0 → d_v)
  int64_t gate_rank = 0;   // KDA/GDN-2 g_proj: d → gate_rank → heads·d_v (0 → d_v)
  bool recompute = false;  // true: the backward recomputes what the forward could save (ops::delta_rule_saved_bytes)
};

}  // namespace linea
