// IndexPermutation: a pseudo-random permutation of [0, n) that maps one index at a time in O(1)
// memory, so any rank can find the sequence in any global slot without materialising a shuffle.
// It is a balanced Feistel network on 2h bits (4^h ≥ n) with 6 rounds, round function
// F(x, k) = splitmix64(x ⊕ k) mod 2^h, and cycle walking: indices ≥ n are fed through the network
// again until they land in [0, n) (fewer than 4 passes on average). The permutation depends only
// on (n, key) and is the same on every platform.
#pragma once
#include <array>
#include <cstdint>

namespace linea::data {

// splitmix64's output function: a bijective 64-bit mix.
uint64_t mix64(uint64_t x);

class IndexPermutation {
 public:
  IndexPermutation(uint64_t n, uint64_t key);
  uint64_t size() const { return n_; }
  // The image of i ∈ [0, n).
  uint64_t operator()(uint64_t i) const;

 private:
  static constexpr int kRounds = 6;
  uint64_t feistel(uint64_t x) const;
  uint64_t n_;
  int half_bits_;
  uint64_t half_mask_;
  std::array<uint64_t, kRounds> round_keys_;
};

}  // namespace linea::data
