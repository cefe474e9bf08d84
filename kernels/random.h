// Rng: a small, fast, seedable generator (xoshiro256**, seeded through splitmix64) whose whole
// state is four words, so it can be saved in checkpoints and restored bit for bit.
//
// The fills draw one 64-bit key from the Rng and make element i of the tensor a pure function of
// (key, i) (the splitmix64 output at counter i, Box–Muller over pairs of elements for normals), so
// a large tensor is filled by all threads at once and gives the same values whatever their number.
#pragma once
#include <array>
#include <cstdint>

#include "kernels/tensor.h"

namespace linea {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0);
  uint64_t next_u64();
  double uniform();  // [0, 1)
  double normal();   // N(0, 1), Box–Muller
  std::array<uint64_t, 4> state() const { return s_; }
  void set_state(const std::array<uint64_t, 4>& s) { s_ = s; }

 private:
  std::array<uint64_t, 4> s_;
};

// Fill a CPU f32/f64 tensor; each call advances rng by one draw.
void fill_uniform(Tensor t, Rng& rng, double lo, double hi);
void fill_normal(Tensor t, Rng& rng, double mean, double stddev);
void fill_constant(Tensor t, double value);

}  // namespace linea
