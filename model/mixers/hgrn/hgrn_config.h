// HgrnConfig: the settings of HGRN (reference/mixers.md §1.7), read from [model.hgrn] with fla's
// keys: expand_ratio (1: the recurrence's width W = expand_ratio · d_model, of i, f, g and the
// norm), lower_bound (true: the forget gates' lower bounds shared across the stack).
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "model/mixer_config.h"

namespace linea {

class HgrnConfig final : public MixerConfigOf<HgrnConfig> {
 public:
  explicit HgrnConfig(std::string section = "model.hgrn") : MixerConfigOf("hgrn", std::move(section)) {}
  void read(ConfigSection& table) override;
  void resolve(int64_t d_model, const ConfigFieldError& fail) override;

  int64_t expand_ratio = 1;
  bool lower_bound = true;
  int64_t width = 0;  // resolved: expand_ratio · d_model
};

}  // namespace linea
