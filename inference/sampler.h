// Sampler: the next token from one row of logits. temperature 0 is greedy (the argmax, the lowest
// id among ties); otherwise p ∝ exp(logit / temperature), restricted to the top_k most likely
// tokens (0: all) and then to the smallest set of most likely tokens whose mass reaches top_p
// (1: all), renormalised, drawn with the caller's generator.
#pragma once
#include <cstdint>
#include <random>

#include "kernels/tensor.h"

namespace linea::inference {

struct SamplingOptions {
  double temperature = 0;  // 0: greedy
  int64_t top_k = 0;       // 0: no limit
  double top_p = 1;        // 1: no limit
  uint64_t seed = 0;       // request i draws from a generator seeded with (seed, i)

  // Throws std::invalid_argument naming the field: temperature ≥ 0, top_k ≥ 0, 0 < top_p ≤ 1.
  void validate() const;
};

// logits: f32 or f64 [rows, V] on the host; row r.
int32_t sample_token(const Tensor& logits, int64_t row, const SamplingOptions& options, std::mt19937_64& rng);

// The argmax of row r (the lowest id among ties).
int32_t argmax_token(const Tensor& logits, int64_t row);

// log softmax(row r)[token], computed in f64.
double token_log_probability(const Tensor& logits, int64_t row, int32_t token);

}  // namespace linea::inference
