// Parameter counts of a model config by group and by optimizer role, computed from the declared
// shapes (the model is built without memory, so a 1.3B config costs nothing to count).
// Groups: embedding, head, each mixer family's group (MixerFamily::parameter_group, in alphabetical
// order: attention for softmax layers, linear mixers for the delta rule's, their gates and output
// norms included), mlp, norms (block and final RMSNorms).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/parameters.h"

namespace linea {

struct ParameterCount {
  struct Entry {
    std::string name;
    int64_t tensors = 0;
    int64_t count = 0;
  };
  std::vector<Entry> groups;  // in the order listed above, empty groups included
  std::vector<Entry> roles;   // one per ParamRole
  int64_t total = 0;
  int64_t non_embedding = 0;  // total − embedding − head

  int64_t group(std::string_view name) const;  // 0 for an unknown group
};

ParameterCount count_parameters(const ModelConfig& config);

// Human-readable tables: counts, millions and share of the total, by group and by role.
std::string format_parameter_count(const ModelConfig& config, const ParameterCount& count);

}  // namespace linea
