#include "kernels/random.h"

#include <cmath>
#include <stdexcept>

namespace linea {

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

template <class Fn> void fill_with(Tensor t, Fn fn) {
  if (t.device() != Device::cpu) throw std::invalid_argument("fill: CPU tensors only, got " + t.describe());
  const int64_t n = t.numel();
  if (t.dtype() == DType::f32) {
    float* p = t.data<float>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(fn());
  } else if (t.dtype() == DType::f64) {
    double* p = t.data<double>();
    for (int64_t i = 0; i < n; ++i) p[i] = fn();
  } else {
    throw std::invalid_argument("fill: f32 or f64 tensors only, got " + t.describe());
  }
}
}  // namespace

Rng::Rng(uint64_t seed) {
  for (auto& w : s_) w = splitmix64(seed);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

void fill_uniform(Tensor t, Rng& rng, double lo, double hi) {
  fill_with(t, [&] { return lo + (hi - lo) * rng.uniform(); });
}
void fill_normal(Tensor t, Rng& rng, double mean, double stddev) {
  fill_with(t, [&] { return mean + stddev * rng.normal(); });
}
void fill_constant(Tensor t, double value) {
  fill_with(t, [&] { return value; });
}

}  // namespace linea
