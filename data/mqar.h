// MQAR: Zoology's multi-query associative recall (Arora et al. 2023, zoology/data/associative_recall.py
// multiquery_ar), one sequence at a time and deterministic in (seed, index).
//
// A sequence of T tokens over ids [0, V): P key-value pairs k₁ v₁ … k_P v_P (keys drawn without
// replacement from [1, V/2), values from [V/2, V)), then the query region of T − 2P tokens, cut
// into (T − 2P) / 2 slots of two. Each key kᵢ is asked once, at slot gᵢ (the gᵢ drawn without
// replacement with p(g) ∝ (g + 1)^(a − 1), a = power_a: Zoology's power law, most queries near
// the pairs): the slot's first token is kᵢ and its target (the next token) is vᵢ. Every other
// position of the query region holds a uniform random id of [0, V) (Zoology's random_non_queries),
// and has no target. So targets[t] = vᵢ at the P query positions, −1 elsewhere: accuracy is the
// share of query positions whose argmax is the value.
// Needs T even, 4P ≤ T, and P < V/2 keys and values to draw from.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace linea::data {

struct MqarConfig {
  int64_t vocab = 8192;   // V
  int64_t seq_len = 256;  // T
  int64_t pairs = 16;     // P
  double power_a = 0.01;  // a
};

// Throws std::invalid_argument naming `source` and the field when a constraint fails.
void check_mqar_config(const MqarConfig& config, const std::string& source);

struct MqarSequence {
  std::vector<int32_t> inputs;           // [T]
  std::vector<int32_t> targets;          // [T]: the value after each query key, −1 elsewhere
  std::vector<int64_t> query_positions;  // the P positions t with targets[t] ≥ 0, ascending
};

MqarSequence mqar_sequence(const MqarConfig& config, uint64_t seed, uint64_t index);

// "mqar:vocab=8192,seq_len=256,pairs=16[,power_a=0.01]": a data.path that names an MQAR source.
// Keys may come in any order; a key left out keeps its default (seq_len: `default_seq_len`).
// Throws std::invalid_argument naming `source` and the key for an unknown key or a bad value.
bool is_mqar_path(const std::string& path);
MqarConfig parse_mqar_path(const std::string& path, int64_t default_seq_len, const std::string& source);

}  // namespace linea::data
