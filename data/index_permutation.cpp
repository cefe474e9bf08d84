#include "data/index_permutation.h"

#include <stdexcept>
#include <string>

namespace linea::data {

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

IndexPermutation::IndexPermutation(uint64_t n, uint64_t key) : n_(n), half_bits_(1) {
  while (half_bits_ < 32 && (uint64_t{1} << (2 * half_bits_)) < n) ++half_bits_;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
  uint64_t k = key;
  for (auto& round_key : round_keys_) round_key = k = mix64(k);
}

uint64_t IndexPermutation::feistel(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & half_mask_;
  for (uint64_t round_key : round_keys_) {
    const uint64_t next = left ^ (mix64(right ^ round_key) & half_mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

uint64_t IndexPermutation::operator()(uint64_t i) const {
  if (i >= n_) {
    throw std::out_of_range("permutation index " + std::to_string(i) + " outside [0, " + std::to_string(n_) + ")");
  }
  uint64_t x = feistel(i);
  while (x >= n_) x = feistel(x);
  return x;
}

}  // namespace linea::data
