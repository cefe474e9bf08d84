// config_difference: what changed between two resolved run configurations (TOML texts, as
// RunConfig::resolved holds them), key by key: "optimizer.lr: 0.01 → 0.0001", "train.stop_at: 50 →
// (absent)", in key order. Used to say which keys differ when a run resumes from a checkpoint
// written with another configuration. A text that does not parse is one difference naming it.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace linea {

std::vector<std::string> config_differences(std::string_view before, std::string_view after);

}  // namespace linea
