#include "model/mixers/delta_rule/delta_rule_config.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "data/config_reader.h"

namespace linea {

const std::vector<DeltaRulePreset>& delta_rule_presets() {
  using ops::DecayKind, ops::GateKind, ops::GateActivation;
  static const std::vector<DeltaRulePreset> presets = {
      {"deltanet", DecayKind::none, GateKind::beta, GateActivation::silu, false},
      {"gdn", DecayKind::scalar, GateKind::beta, GateActivation::silu, true},
      {"kda", DecayKind::channel, GateKind::beta, GateActivation::sigmoid, true},
      {"gdn2", DecayKind::channel, GateKind::erase_write, GateActivation::sigmoid, true},
  };
  return presets;
}

const DeltaRulePreset& delta_rule_preset(std::string_view name) {
  std::string names;
  for (const DeltaRulePreset& p : delta_rule_presets()) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + std::string(p.name);
  }
  throw std::invalid_argument("unknown delta-rule mixer '" + std::string(name) + "'; expected one of " + names);
}

DeltaRuleConfig::DeltaRuleConfig(std::string_view mixer_name, std::string section_path)
    : MixerConfigOf(std::string(mixer_name), std::move(section_path)), preset(delta_rule_preset(mixer_name)) {
  output_gate = preset.output_gate;
}

void DeltaRuleConfig::read(ConfigSection& table) {
  heads = table.integer("heads", heads);
  d_k = table.integer("d_k", d_k);
  d_v = table.integer("d_v", d_v);
  conv = table.integer("conv", conv);
  output_gate = table.boolean("output_gate", output_gate);
  allow_neg_eigval = table.boolean("allow_neg_eigval", allow_neg_eigval);
  decay_rank = table.integer("decay_rank", decay_rank);
  gate_rank = table.integer("gate_rank", gate_rank);
  recompute = table.boolean("recompute", recompute);
}

void DeltaRuleConfig::resolve(int64_t d_model, const ConfigFieldError& fail) {
  fail.at_least("heads", heads, 1);
  if (d_k == 0) d_k = fail.d_model_per_head(d_model, heads, "d_k");
  fail.at_least("d_k", d_k, 1);
  if (d_v == 0) d_v = d_k;
  fail.at_least("d_v", d_v, 1);
  fail.at_least("conv", conv, 0);
  if (conv > 64) fail("conv", "expected a kernel size in [0, 64], got " + std::to_string(conv));
  if (decay_rank == 0) decay_rank = d_v;
  if (gate_rank == 0) gate_rank = d_v;
  fail.at_least("decay_rank", decay_rank, 1);
  fail.at_least("gate_rank", gate_rank, 1);
}

ops::DeltaRuleSpec DeltaRuleConfig::spec() const { return {preset.decay, preset.gate, 1.0 / std::sqrt(double(d_k))}; }

ops::GateActivation DeltaRuleConfig::output_activation() const {
  return output_gate ? preset.output_act : ops::GateActivation::none;
}

}  // namespace linea
