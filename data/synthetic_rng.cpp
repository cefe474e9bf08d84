#include "data/synthetic_rng.h"

#include <stdexcept>
#include <unordered_map>

namespace linea::data {

std::vector<int64_t> SyntheticRng::distinct(int64_t n, int64_t k) {
  if (k > n || k < 0)
    throw std::invalid_argument("SyntheticRng::distinct: cannot draw " + std::to_string(k) + " of " +
                                std::to_string(n));
  // Fisher–Yates over a virtual identity array, the swapped entries kept in a map: O(k).
  std::unordered_map<int64_t, int64_t> swapped;
  auto at = [&](int64_t i) {
    const auto it = swapped.find(i);
    return it == swapped.end() ? i : it->second;
  };
  std::vector<int64_t> out;
  out.reserve(size_t(k));
  for (int64_t i = 0; i < k; ++i) {
    const int64_t j = i + int64_t(below(uint64_t(n - i)));
    const int64_t vi = at(i), vj = at(j);
    swapped[j] = vi;
    out.push_back(vj);
  }
  return out;
}

}  // namespace linea::data
