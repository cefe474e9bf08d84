#include "worker/grad_clip.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "parallel/host_collectives.h"
#include "worker/float_dispatch.h"
#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/optimizer_math.h"
#endif

namespace linea {
namespace {

constexpr int64_t kSumBlock = 1 << 14;  // fixed, so the summation order never depends on threads

template <class T>
double blocked_sum_of_squares(const T* x, int64_t n) {
  const int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<double> partial(static_cast<size_t>(blocks));
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    double s = 0;
    const int64_t end = std::min(n, (b + 1) * kSumBlock);
    for (int64_t i = b * kSumBlock; i < end; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    partial[b] = s;
  }
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

template <class T>
void scale(T* x, int64_t n, double factor) {
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<T>(static_cast<double>(x[i]) * factor);
}

void check_finalized(const ParameterSet& params, const char* who) {
  if (!params.finalized()) throw std::invalid_argument(std::string(who) + ": the ParameterSet is not finalized");
}

// On a GPU: f32 only (the kernels' type).
void check_gpu_dtype(const Tensor& x, const char* who) {
  if (x.device() == Device::cuda && x.dtype() != DType::f32) {
    throw std::invalid_argument(std::string(who) + ": on a GPU the tensor must be f32, got " + x.describe());
  }
}

}  // namespace

double sum_of_squares(const Tensor& x) {
  check_gpu_dtype(x, "sum_of_squares");
  if (x.device() == Device::cuda) return sums_of_squares({x})[0];
  double total = 0;
  with_float_type(x.dtype(), "sum_of_squares", [&](auto zero) {
    using T = decltype(zero);
    total = blocked_sum_of_squares<T>(x.data<T>(), x.numel());
  });
  return total;
}

std::vector<double> sums_of_squares(const std::vector<Tensor>& xs) {
  std::vector<double> sums(xs.size());
  if (xs.empty() || xs.front().device() == Device::cpu) {
    for (size_t i = 0; i < xs.size(); ++i) {
      if (xs[i].device() != Device::cpu) {
        throw std::invalid_argument("sums_of_squares: tensors on several devices, " + xs[i].describe());
      }
      sums[i] = sum_of_squares(xs[i]);
    }
    return sums;
  }
#ifdef LINEA_WITH_CUDA
  std::vector<std::pair<const float*, int64_t>> runs;
  for (const Tensor& x : xs) {
    if (x.device() != Device::cuda)
      throw std::invalid_argument("sums_of_squares: tensors on several devices, " + x.describe());
    check_gpu_dtype(x, "sums_of_squares");
    runs.emplace_back(x.data<float>(), x.numel());
  }
  cuda::sums_of_squares(runs, sums.data());
#endif
  return sums;
}

void scale_tensor(const Tensor& x, double factor) {
  check_gpu_dtype(x, "scale_tensor");
  if (x.device() == Device::cuda) {
#ifdef LINEA_WITH_CUDA
    return cuda::scale(x.data<float>(), x.numel(), factor);
#endif
  }
  with_float_type(x.dtype(), "scale_tensor", [&](auto zero) {
    using T = decltype(zero);
    scale<T>(x.data<T>(), x.numel(), factor);
  });
}

double grad_sum_of_squares(const ParameterSet& params) {
  check_finalized(params, "grad_sum_of_squares");
  return sum_of_squares(params.grads());
}

double grad_norm(const ParameterSet& params) { return std::sqrt(grad_sum_of_squares(params)); }

double grad_sum_of_squares(const ParameterSet& params, const TensorParallel& tp) {
  if (tp.size == 1) return grad_sum_of_squares(params);
  check_finalized(params, "grad_sum_of_squares");
  Tensor sums = Tensor::zeros({2}, DType::f64);  // [shards, replicated]
  std::vector<Tensor> grads;
  for (const Parameter& p : params.params()) grads.push_back(p.grad);
  const std::vector<double> each = sums_of_squares(grads);
  for (size_t i = 0; i < each.size(); ++i) sums.data<double>()[params.params()[i].shard_dim < 0 ? 1 : 0] += each[i];
  all_reduce_host(*tp.comm, sums.slice(0, 1), ReduceOp::sum);
  return sums.data<double>()[0] + sums.data<double>()[1];
}

void scale_grads(ParameterSet& params, double factor) {
  check_finalized(params, "scale_grads");
  scale_tensor(params.grads(), factor);
}

double clip_grad_norm(ParameterSet& params, double max_norm) {
  if (!(max_norm >= 0)) {
    throw std::invalid_argument("clip_grad_norm: max_norm must be >= 0, got " + std::to_string(max_norm));
  }
  const double norm = grad_norm(params);
  if (max_norm > 0 && std::isfinite(norm) && norm > max_norm) scale_grads(params, max_norm / (norm + 1e-6));
  return norm;
}

}  // namespace linea
