// Tiny training jobs of the gated-linear-attention family's and HGRN's mixers, shared by the CPU
// training test and the tensor-parallel one: a 4-layer model at d_model 64 (pure, or 3:1 with
// softmax attention) whose mixer tables give every mixer heads that split over 1, 2 or 4 ranks.
#pragma once
#include <string>
#include <vector>

namespace linea::testing {

inline const std::vector<std::string>& gla_family_mixers() {
  static const std::vector<std::string> mixers = {"gla", "retnet", "hgrn", "hgrn2", "mamba2", "rwkv6"};
  return mixers;
}

// The [model] and mixer tables of the job (no [run], [train] or [data]).
inline std::string gla_family_model(const std::string& mixer, const std::string& hybrid, int vocab) {
  return R"([model]
d_model = 64
layers = 4
vocab = )" +
         std::to_string(vocab) +
         R"(
mixer = ")" +
         mixer +
         R"("
hybrid = ")" +
         hybrid +
         R"("
tie_embeddings = true
[model.gla]
heads = 4
[model.retnet]
heads = 4
[model.hgrn]
expand_ratio = 1
[model.hgrn2]
expand_ratio = 16
[model.mamba2]
head_dim = 16
state_size = 16
[model.rwkv6]
heads = 4
proj_rank = 8
decay_rank = 16
[model.attention]
heads = 4
head_dim = 16
)";
}

}  // namespace linea::testing
