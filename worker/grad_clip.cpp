#include "worker/grad_clip.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/optimizer_math.h"
#include "parallel/host_collectives.h"

namespace linea {
namespace {

void check_finalized(const ParameterSet& params, const char* who) {
  if (!params.finalized()) throw std::invalid_argument(std::string(who) + ": the ParameterSet is not finalized");
}

}  // namespace

double grad_sum_of_squares(const ParameterSet& params) {
  check_finalized(params, "grad_sum_of_squares");
  return ops::sums_of_squares({params.grads()})[0];
}

double grad_norm(const ParameterSet& params) { return std::sqrt(grad_sum_of_squares(params)); }

double grad_sum_of_squares(const ParameterSet& params, const TensorParallel& tp) {
  if (tp.size == 1) return grad_sum_of_squares(params);
  check_finalized(params, "grad_sum_of_squares");
  Tensor sums = Tensor::zeros({2}, DType::f64);  // [shards, replicated]
  std::vector<Tensor> grads;
  for (const Parameter& p : params.params()) grads.push_back(p.grad);
  const std::vector<double> each = ops::sums_of_squares(grads);
  for (size_t i = 0; i < each.size(); ++i) sums.data<double>()[params.params()[i].shard_dim < 0 ? 1 : 0] += each[i];
  all_reduce_host(*tp.comm, sums.slice(0, 1), ReduceOp::sum);
  return sums.data<double>()[0] + sums.data<double>()[1];
}

void scale_grads(ParameterSet& params, double factor) {
  check_finalized(params, "scale_grads");
  ops::scale(params.grads(), factor);
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
