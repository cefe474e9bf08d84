// Inputs of the Model tests (unit/test_model*.cpp, unit/inference/, mpi/test_tensor_parallel.cpp): a model config
// parsed from text; a tiny hybrid whose sizes each test picks (softmax attention at layer 1, the
// other layers the given linear mixer; every layer attention for mixer "attention"), and a batch
// of packed random documents with next-token targets (−1 at each document's last token, which has
// nothing to predict).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/config_reader.h"
#include "kernels/random.h"
#include "kernels/seq_layout.h"
#include "model/mixers/attention/attention_config.h"
#include "model/mixers/delta_rule/delta_rule_config.h"
#include "model/model_config.h"
#include "tests/testing/kernel_test.h"
#include "tests/testing/mixers/gla_family_sizes.h"

namespace linea::testing {

struct TinyHybridSizes {
  int64_t d_model, layers, vocab, mlp_hidden;
  double init_std;
  int64_t linear_heads, d_k, d_v, conv, decay_rank, gate_rank;
  int64_t attention_heads, kv_heads, head_dim;
};

// Sizes small enough for finite differences over every parameter tensor (unit/test_model.cpp,
// unit/test_model_routing.cpp). init_std 0.2: large enough that every nonlinearity matters, small
// enough for central differences.
inline constexpr TinyHybridSizes kFiniteDifferenceSizes{.d_model = 8,
                                                        .layers = 3,
                                                        .vocab = 11,
                                                        .mlp_hidden = 12,
                                                        .init_std = 0.2,
                                                        .linear_heads = 2,
                                                        .d_k = 4,
                                                        .d_v = 3,
                                                        .conv = 3,
                                                        .decay_rank = 2,
                                                        .gate_rank = 2,
                                                        .attention_heads = 2,
                                                        .kv_heads = 1,
                                                        .head_dim = 4};

// The GPU model tests' tiny hybrid (gpu/test_gpu_model.cpp, gpu/inference/): head sizes the CUDA
// kernels take (attention head_dim 64, GQA of 2 query heads over 1 kv head).
inline constexpr TinyHybridSizes kGpuSizes{.d_model = 64,
                                           .layers = 3,
                                           .vocab = 97,
                                           .mlp_hidden = 96,
                                           .init_std = 0.1,
                                           .linear_heads = 2,
                                           .d_k = 32,
                                           .d_v = 32,
                                           .conv = 4,
                                           .decay_rank = 16,
                                           .gate_rank = 16,
                                           .attention_heads = 2,
                                           .kv_heads = 1,
                                           .head_dim = 64};

// The inference tests' tiny hybrid (unit/inference/): three layers of width 16, small enough to
// decode and score exhaustively; a test changes the fields its contract needs (vocab, init_std,
// widths).
inline constexpr TinyHybridSizes kInferenceSizes{.d_model = 16,
                                                 .layers = 3,
                                                 .vocab = 23,
                                                 .mlp_hidden = 24,
                                                 .init_std = 0.3,
                                                 .linear_heads = 2,
                                                 .d_k = 8,
                                                 .d_v = 8,
                                                 .conv = 4,
                                                 .decay_rank = 4,
                                                 .gate_rank = 4,
                                                 .attention_heads = 4,
                                                 .kv_heads = 2,
                                                 .head_dim = 4};

// The ModelConfig of the [model] tables of a config text (with `overrides`), rejecting unknown keys.
inline ModelConfig parse_model(const std::string& text, const std::vector<std::string>& overrides = {}) {
  ConfigReader reader = ConfigReader::from_string(text, "test.toml", overrides);
  ModelConfig config = ModelConfig::parse(reader.section("model"));
  reader.check_unknown_keys({"model"});
  return config;
}

inline ModelConfig tiny_hybrid_config(const std::string& mixer, bool tied, const TinyHybridSizes& s) {
  ModelConfig c;
  c.d_model = s.d_model;
  c.layers = s.layers;
  c.vocab = s.vocab;
  c.tie_embeddings = tied;
  c.mlp_hidden = s.mlp_hidden;
  c.init_std = s.init_std;
  c.mixer = mixer;
  if (mixer != "attention") {
    c.hybrid = "[1]";
    c.attention_layers = {1};
    MixerConfig& config = c.mixer_configs.get(mixer);
    if (auto* l = dynamic_cast<DeltaRuleConfig*>(&config)) {
      l->heads = s.linear_heads;
      l->d_k = s.d_k;
      l->d_v = s.d_v;
      l->conv = s.conv;
      l->decay_rank = s.decay_rank;
      l->gate_rank = s.gate_rank;
    } else {
      set_gla_family_sizes(config, s.d_model, s.linear_heads, s.d_k, s.d_v, s.decay_rank);
    }
  }
  AttentionConfig& a = c.mixer_config<AttentionConfig>("attention");
  a.heads = s.attention_heads;
  a.kv_heads = s.kv_heads;
  a.head_dim = s.head_dim;
  return c;
}

struct PackedBatch {
  SeqLayout seqs;
  Tensor ids, targets;
};

// Documents of the given lengths, one after another, of token ids uniform in [0, vocab).
inline PackedBatch packed_batch(const std::vector<int64_t>& document_lengths, int64_t vocab, uint64_t seed) {
  PackedBatch b;
  std::vector<int64_t> offsets = {0};
  for (const int64_t length : document_lengths) offsets.push_back(offsets.back() + length);
  b.seqs = SeqLayout{offsets};
  Rng rng(seed);
  std::vector<int32_t> ids(offsets.back()), targets(offsets.back());
  for (auto& id : ids) id = static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(vocab));
  for (int64_t s = 0; s < b.seqs.num_seqs(); ++s) {
    for (int64_t t = b.seqs.begin(s); t < b.seqs.end(s); ++t) targets[t] = t + 1 < b.seqs.end(s) ? ids[t + 1] : -1;
  }
  b.ids = index_tensor(ids);
  b.targets = index_tensor(targets);
  return b;
}

}  // namespace linea::testing
