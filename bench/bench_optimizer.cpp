// Optimizer benchmark (CPU): Newton–Schulz at the matrix shapes of a d = 1024 model, as time per
// call and as a fraction of the BLAS sgemm throughput measured in the same run, and AdamW / Muon
// steps over a ParameterSet, as parameters per second. One JSON line per measurement.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench/bench_util.h"
#include "kernels/newton_schulz.h"
#include "kernels/random.h"
#include "worker/muon.h"
#include "worker/optimizer.h"

namespace linea {
namespace {

double sgemm_gflops() {
  const int n = 1024;
  std::vector<float> a(n * n, 1e-3f), b(n * n, 1e-3f), c(n * n);
  const double s = bench::median_s(5, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
  });
  return 2.0 * n * n * n / s / 1e9;
}

void bench_newton_schulz(int64_t rows, int64_t cols, double reference_gflops) {
  Rng rng(1);
  Tensor g = Tensor::empty({rows, cols}, DType::f32), out = Tensor::empty({rows, cols}, DType::f32);
  fill_normal(g, rng, 0.0, 0.02);
  Tensor ws = Tensor::empty({ops::newton_schulz_workspace_numel(rows, cols)}, DType::f32);
  const double s = bench::median_s(3, [&] { ops::newton_schulz(g, out, 5, ws); });
  const double m = static_cast<double>(std::min(rows, cols)), n = static_cast<double>(std::max(rows, cols));
  const double gflops = 5 * (4 * m * m * n + 2 * m * m * m) / s / 1e9;
  std::printf("{\"bench\":\"newton_schulz\",\"rows\":%ld,\"cols\":%ld,\"ms\":%.2f,\"gflops\":%.1f,\"vs_sgemm\":%.3f}\n",
              static_cast<long>(rows), static_cast<long>(cols), s * 1e3, gflops, gflops / reference_gflops);
}

// One block of a d = 1024 GDN-like layer: 4 projection matrices, an MLP, norms and gates.
void bench_step(OptimizerKind kind) {
  ParameterSet ps;
  for (const char* name : {"q", "k", "v", "o"}) ps.declare(name, {1024, 1024}, ParamRole::matrix, true);
  ps.declare("mlp.gate", {2816, 1024}, ParamRole::matrix, true);
  ps.declare("mlp.up", {2816, 1024}, ParamRole::matrix, true);
  ps.declare("mlp.down", {1024, 2816}, ParamRole::matrix, true);
  ps.declare("norm", {1024}, ParamRole::vector, false);
  ps.declare("a_proj", {8, 1024}, ParamRole::gate, false);
  ps.finalize();
  Rng rng(2);
  fill_normal(ps.values(), rng, 0.0, 0.02);
  fill_normal(ps.grads(), rng, 0.0, 1e-3);
  OptimizerConfig config;
  config.kind = kind;
  auto opt = make_optimizer(config);
  const double s = bench::median_s(3, [&] { opt->step(ps, 1e-3); });
  std::printf("{\"bench\":\"optimizer_step\",\"kind\":\"%s\",\"params\":%ld,\"ms\":%.2f,\"mparams_per_s\":%.1f}\n",
              std::string(optimizer_kind_name(kind)).c_str(), static_cast<long>(ps.numel()), s * 1e3,
              static_cast<double>(ps.numel()) / s / 1e6);
}

}  // namespace
}  // namespace linea

int main() {
  const double reference = linea::sgemm_gflops();
  std::printf("{\"bench\":\"sgemm_1024\",\"gflops\":%.1f}\n", reference);
  linea::bench_newton_schulz(1024, 1024, reference);
  linea::bench_newton_schulz(2816, 1024, reference);
  linea::bench_newton_schulz(1024, 2816, reference);
  linea::bench_step(linea::OptimizerKind::adamw);
  linea::bench_step(linea::OptimizerKind::muon);
}
