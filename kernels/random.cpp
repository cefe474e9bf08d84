#include "kernels/random.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/cpu/parallel.h"

namespace linea {

namespace {
constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;

// splitmix64's output function: mixes one counter value into 64 well-spread bits.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t splitmix64(uint64_t& x) { return mix64(x += kGolden); }
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
double unit_interval(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }  // [0, 1)

// Element i of a fill keyed by `key`: the splitmix64 stream started at key, read at counter i.
uint64_t counter_bits(uint64_t key, uint64_t i) { return mix64(key + (i + 1) * kGolden); }

// Fills a CPU f32/f64 tensor over blocks in parallel, two elements at a time: pair(i, v) gives the
// values v[0], v[1] of elements i and i + 1 (i even; the second is dropped past the end).
template <class PairFn>
void fill_pairs(Tensor t, PairFn pair) {
  if (t.device() != Device::cpu) throw std::invalid_argument("fill: CPU tensors only, got " + t.describe());
  if (t.dtype() != DType::f32 && t.dtype() != DType::f64) {
    throw std::invalid_argument("fill: f32 or f64 tensors only, got " + t.describe());
  }
  const int64_t n = t.numel();
  const bool f32 = t.dtype() == DType::f32;
  void* data = t.raw();
  cpu::for_each_block(n, [&](int64_t begin, int64_t end) {  // blocks have even sizes, so pairs never straddle
    for (int64_t i = begin; i < end; i += 2) {
      double v[2];
      pair(static_cast<uint64_t>(i), v);
      const int64_t count = std::min<int64_t>(2, end - i);
      for (int64_t j = 0; j < count; ++j) {
        if (f32) {
          static_cast<float*>(data)[i + j] = static_cast<float>(v[j]);
        } else {
          static_cast<double*>(data)[i + j] = v[j];
        }
      }
    }
  });
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

double Rng::uniform() { return unit_interval(next_u64()); }

double Rng::normal() {
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

void fill_uniform(Tensor t, Rng& rng, double lo, double hi) {
  const uint64_t key = rng.next_u64();
  fill_pairs(t, [&](uint64_t i, double v[2]) {
    v[0] = lo + (hi - lo) * unit_interval(counter_bits(key, i));
    v[1] = lo + (hi - lo) * unit_interval(counter_bits(key, i + 1));
  });
}

// Box–Muller on the pair (i, i + 1): r = sqrt(-2 ln u1) with u1 in (0, 1], θ = 2π u2;
// elements r cos θ and r sin θ.
void fill_normal(Tensor t, Rng& rng, double mean, double stddev) {
  const uint64_t key = rng.next_u64();
  fill_pairs(t, [&](uint64_t i, double v[2]) {
    const double u1 = 1.0 - unit_interval(counter_bits(key, i));
    const double theta = 2.0 * M_PI * unit_interval(counter_bits(key, i + 1));
    const double r = stddev * std::sqrt(-2.0 * std::log(u1));
    v[0] = mean + r * std::cos(theta);
    v[1] = mean + r * std::sin(theta);
  });
}

void fill_constant(Tensor t, double value) {
  fill_pairs(t, [&](uint64_t, double v[2]) { v[0] = v[1] = value; });
}

}  // namespace linea
