// The tiny model the CPU tests train, evaluate and decode: d_model 16, two layers (GDN, then
// softmax attention: hybrid 1:1), two heads of 8 in each.
#pragma once
#include <cstdint>
#include <string>

namespace linea::testing {

// Its [model], [model.linear] and [model.attention] tables; `more`: further [model] keys, one a line.
inline std::string tiny_hybrid_model(int64_t vocab, const std::string& more = "") {
  return "[model]\nd_model = 16\nlayers = 2\nvocab = " + std::to_string(vocab) +
         "\nmixer = \"gdn\"\nhybrid = \"1:1\"\n" + more +
         "[model.linear]\nheads = 2\nd_k = 8\nd_v = 8\n"
         "[model.attention]\nheads = 2\nhead_dim = 8\n";
}

}  // namespace linea::testing
