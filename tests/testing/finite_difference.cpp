#include "tests/testing/finite_difference.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

namespace linea::testing {

GradCheck gradcheck(const std::function<double()>& loss, Tensor input, const Tensor& analytic,
                    int64_t max_entries, double eps, uint64_t seed) {
  if (input.dtype() != DType::f64 || analytic.dtype() != DType::f64 || input.numel() != analytic.numel()) {
    throw std::invalid_argument("gradcheck: input and analytic must be f64 of equal size, got " +
                                input.describe() + " and " + analytic.describe());
  }
  std::vector<int64_t> idx(static_cast<size_t>(input.numel()));
  std::iota(idx.begin(), idx.end(), 0);
  if (static_cast<int64_t>(idx.size()) > max_entries) {
    Rng rng(seed);
    for (size_t i = idx.size() - 1; i > 0; --i) std::swap(idx[i], idx[rng.next_u64() % (i + 1)]);
    idx.resize(static_cast<size_t>(max_entries));
  }
  double* x = input.data<double>();
  const double* a = analytic.data<double>();
  GradCheck r;
  for (int64_t i : idx) {
    const double saved = x[i];
    x[i] = saved + eps;
    const double lp = loss();
    x[i] = saved - eps;
    const double lm = loss();
    x[i] = saved;
    const double numeric = (lp - lm) / (2 * eps);
    const double err = std::abs(numeric - a[i]);
    r.max_abs_err = std::max(r.max_abs_err, err);
    r.max_rel_err = std::max(r.max_rel_err, err / std::max({std::abs(a[i]), std::abs(numeric), 1e-6}));
    ++r.checked;
  }
  return r;
}

double dot(const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel()) throw std::invalid_argument("dot: size mismatch");
  const double* x = a.data<double>();
  const double* y = b.data<double>();
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += x[i] * y[i];
  return s;
}

}  // namespace linea::testing
