#include "model/mixers/hgrn/hgrn_config.h"

#include "data/config_reader.h"

namespace linea {

void HgrnConfig::read(ConfigSection& table) {
  expand_ratio = table.integer("expand_ratio", expand_ratio);
  lower_bound = table.boolean("lower_bound", lower_bound);
}

void HgrnConfig::resolve(int64_t d_model, const ConfigFieldError& fail) {
  fail.at_least("expand_ratio", expand_ratio, 1);
  width = expand_ratio * d_model;
}

}  // namespace linea
