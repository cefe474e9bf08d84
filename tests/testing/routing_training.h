// Tiny training jobs of routed delta-rule models (model.routing), shared by the CPU training test
// (unit/test_routing_training.cpp) and the parallel one (mpi/test_routing_parallel.cpp): a 4-layer
// model at d_model 64, 3:1 with softmax attention at layer 3 (so CLER's links are 0 → 1 → 2), with
// 4 heads that split over 1, 2 or 4 ranks.
#pragma once
#include <string>
#include <vector>

namespace linea::testing {

inline const std::vector<std::string>& routing_kinds() {
  static const std::vector<std::string> kinds = {"cler", "cler_h", "clvr"};
  return kinds;
}

// The [model] tables of the job (no [run], [optimizer], [train] or [data]).
inline std::string routed_model(const std::string& mixer, const std::string& kind, int vocab) {
  return "[model]\nd_model = 64\nlayers = 4\nvocab = " + std::to_string(vocab) + "\nmixer = \"" + mixer +
         "\"\nhybrid = \"3:1\"\ntie_embeddings = true\n"
         "[model.linear]\nheads = 4\nd_k = 16\nd_v = 16\n"
         "[model.attention]\nheads = 4\nhead_dim = 16\n"
         "[model.routing]\nkind = \"" +
         kind + "\"\n";
}

}  // namespace linea::testing
