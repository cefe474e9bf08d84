#include "inference/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace linea::inference {

namespace {

// Row r of logits, widened to f64.
std::vector<double> logit_row(const Tensor& logits, int64_t row) {
  if (logits.ndim() != 2 || logits.device() != Device::cpu || row < 0 || row >= logits.dim(0)) {
    throw std::invalid_argument("sampler: logits must be [rows, V] on the host with row " + std::to_string(row) +
                                ", got " + logits.describe());
  }
  const int64_t V = logits.dim(1);
  std::vector<double> out(static_cast<size_t>(V));
  if (logits.dtype() == DType::f32) {
    const float* p = logits.data<float>() + row * V;
    std::copy(p, p + V, out.begin());
  } else if (logits.dtype() == DType::f64) {
    const double* p = logits.data<double>() + row * V;
    std::copy(p, p + V, out.begin());
  } else {
    throw std::invalid_argument("sampler: logits must be f32 or f64, got " + logits.describe());
  }
  return out;
}

}  // namespace

void SamplingOptions::validate() const {
  if (!(temperature >= 0) || !std::isfinite(temperature)) {
    throw std::invalid_argument("sampling: temperature must be ≥ 0 (0: greedy), got " + std::to_string(temperature));
  }
  if (top_k < 0) throw std::invalid_argument("sampling: top_k must be ≥ 0 (0: no limit), got " + std::to_string(top_k));
  if (!(top_p > 0 && top_p <= 1)) {
    throw std::invalid_argument("sampling: top_p must be in (0, 1], got " + std::to_string(top_p));
  }
}

int32_t argmax_token(const Tensor& logits, int64_t row) {
  const std::vector<double> z = logit_row(logits, row);
  return static_cast<int32_t>(std::max_element(z.begin(), z.end()) - z.begin());
}

double token_log_probability(const Tensor& logits, int64_t row, int32_t token) {
  const std::vector<double> z = logit_row(logits, row);
  if (token < 0 || token >= static_cast<int32_t>(z.size())) {
    throw std::invalid_argument("token_log_probability: token " + std::to_string(token) + " outside [0, " +
                                std::to_string(z.size()) + ")");
  }
  // log softmax(z)_t = z_t − (m + log Σ exp(z − m)),  m = max z
  const double m = *std::max_element(z.begin(), z.end());
  double sum = 0;
  for (double v : z) sum += std::exp(v - m);
  return z[static_cast<size_t>(token)] - (m + std::log(sum));
}

int32_t sample_token(const Tensor& logits, int64_t row, const SamplingOptions& options, std::mt19937_64& rng) {
  if (options.temperature == 0) return argmax_token(logits, row);
  const std::vector<double> z = logit_row(logits, row);
  // Tokens by decreasing logit (ties: lower id first), cut to top_k.
  std::vector<int32_t> order(z.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return z[a] > z[b]; });
  if (options.top_k > 0 && options.top_k < static_cast<int64_t>(order.size())) order.resize(options.top_k);
  // p_i ∝ exp((z_i − z_max) / T)
  std::vector<double> p(order.size());
  double total = 0;
  for (size_t i = 0; i < order.size(); ++i) total += p[i] = std::exp((z[order[i]] - z[order[0]]) / options.temperature);
  // Nucleus: the shortest prefix whose mass reaches top_p.
  size_t keep = order.size();
  double mass = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    mass += p[i] / total;
    if (mass >= options.top_p) {
      keep = i + 1;
      break;
    }
  }
  std::discrete_distribution<size_t> pick(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(keep));
  return order[pick(rng)];
}

}  // namespace linea::inference
