// SyntheticRng: the random stream of the synthetic tasks (MQAR, the RULER-style generators):
// splitmix64 (state += 0x9E3779B97F4A7C15, output mix64(state)), seeded by mixing a seed with a
// stream number, so that sample i of a task is the same on every platform and in every process
// whatever was generated before it.
#pragma once
#include <cstdint>
#include <vector>

#include "data/index_permutation.h"

namespace linea::data {

class SyntheticRng {
 public:
  SyntheticRng(uint64_t seed, uint64_t stream) : state_(mix64(seed ^ mix64(stream + 0x51ED270B7A3C9F1DULL))) {}
  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ULL;
    return mix64(state_);
  }
  // Uniform in [0, n), n ≥ 1 (Lemire's multiply-shift map of 64 random bits: bias below n · 2^-64).
  uint64_t below(uint64_t n) { return uint64_t((unsigned __int128)(next()) * n >> 64); }
  double unit() { return double(next() >> 11) * 0x1.0p-53; }  // uniform in [0, 1)
  // k distinct values of [0, n) in the order drawn (a partial Fisher–Yates shuffle).
  std::vector<int64_t> distinct(int64_t n, int64_t k);

 private:
  uint64_t state_;
};

}  // namespace linea::data
