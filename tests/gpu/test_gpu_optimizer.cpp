// The optimizers on the GPU against their CPU implementation, on the same random parameters and
// gradients (a set with every role: square, tall and wide matrices, embedding, head, norm, conv,
// gate), over a few steps:
// - AdamW: values and state within err_ratio 1e-6 (the kernel rounds as the CPU loop does, so
//   they are expected to be equal bit for bit; the test prints the differences it measures);
// - Newton–Schulz through cuBLASLt against the CPU's OpenBLAS version: f32 GEMMs within 1e-4,
//   bf16 GEMMs within 3e-2 (err_ratio of the orthogonalised matrix);
// - Muon (bf16 Newton–Schulz): each matrix's total update within 3e-2, the AdamW parameters within
//   1e-6;
// - gradient norm and clipping: the norm within 1e-12 relative, the same on every run, and the
//   clipped gradients within 1e-6;
// - export → import round trips (device → host → device) that continue bit for bit, and
//   DistributedOptimizer with one rank on a GPU communicator equal to the plain optimizer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/newton_schulz.h"
#include "parallel/local_communicator.h"
#include "tests/gpu/gpu_test.h"
#include "worker/adamw.h"
#include "worker/distributed_optimizer.h"
#include "worker/grad_clip.h"
#include "worker/muon.h"

namespace linea {
namespace {

using testing::compare;
using testing::GpuTest;

// Prints what was measured (the report quotes these lines) and checks err_ratio against `limit`.
void expect_close(const std::string& what, const Tensor& ref, const Tensor& got, double limit) {
  const testing::CloseReport r = compare(ref.clone(), got.clone());
  std::printf("measured %-40s abs_err %.3g err_ratio %.3g (limit %.0e)\n", what.c_str(), r.abs_err, r.err_ratio, limit);
  EXPECT_FALSE(r.has_nan) << what;
  EXPECT_LT(r.err_ratio, limit) << what << ": abs_err " << r.abs_err;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.clone(), y = b.clone();
  return x.nbytes() == y.nbytes() && std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0;
}

// One parameter set of every role, on `device`.
void declare(ParameterSet& ps) {
  ps.declare("embedding.weight", {50, 24}, ParamRole::embedding, true);
  ps.declare("norm.weight", {24}, ParamRole::vector, false);
  ps.declare("layers.0.q_proj.weight", {24, 24}, ParamRole::matrix, true);
  ps.declare("layers.0.up.weight", {96, 24}, ParamRole::matrix, true);    // tall: Newton–Schulz on Xᵀ
  ps.declare("layers.0.down.weight", {24, 96}, ParamRole::matrix, true);  // wide
  ps.declare("layers.0.conv.weight", {24, 4}, ParamRole::conv, true);
  ps.declare("layers.0.A_log", {3}, ParamRole::gate, false);
  ps.declare("head.weight", {50, 24}, ParamRole::head, true);
  ps.finalize();
}

Tensor random_f32(int64_t n, Rng& rng, double scale) {
  Tensor t = Tensor::empty({n}, DType::f32);
  fill_normal(t, rng, 0.0, scale);
  return t;
}

// The same model on the CPU and on the GPU, with gradients drawn afresh by next_grads().
struct Twins {
  ParameterSet cpu{DType::f32, Device::cpu}, gpu{DType::f32, Device::cuda};
  Rng rng{7};
  Twins() {
    declare(cpu);
    declare(gpu);
    const Tensor values = random_f32(cpu.numel(), rng, 0.5);
    cpu.values().copy_from(values);
    Tensor(gpu.values()).copy_from(values);
  }
  void next_grads(double scale = 0.1) {
    const Tensor g = random_f32(cpu.numel(), rng, scale);
    Tensor(cpu.grads()).copy_from(g);
    Tensor(gpu.grads()).copy_from(g);
  }
};

OptimizerConfig config_of(OptimizerKind kind) {
  OptimizerConfig c;
  c.kind = kind;
  c.lr = 0.02;
  c.weight_decay = 0.1;
  c.decay_embeddings = true;
  return c;
}

TEST_F(GpuTest, AdamWMatchesTheCpu) {
  Twins t;
  const OptimizerConfig config = config_of(OptimizerKind::adamw);
  AdamW cpu(config), gpu(config);
  for (int step = 0; step < 3; ++step) {
    t.next_grads();
    cpu.step(t.cpu, 0.02 * (step + 1));
    gpu.step(t.gpu, 0.02 * (step + 1));
  }
  expect_close("AdamW values after 3 steps", t.cpu.values(), t.gpu.values(), 1e-6);
  std::printf("measured AdamW values bit-identical to the CPU: %s\n",
              same_bits(t.cpu.values(), t.gpu.values()) ? "yes" : "no");
  const OptimizerState a = cpu.export_state(), b = gpu.export_state();
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, tensor] : a.tensors) {
    ASSERT_EQ(b.tensors.at(name).device(), Device::cpu) << name;
    expect_close("AdamW state " + name, tensor, b.tensors.at(name), 1e-6);
  }
}

TEST_F(GpuTest, NewtonSchulzMatchesTheCpu) {
  Rng rng(3);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{24, 24}, {96, 24}, {24, 96}, {200, 136}}) {
    const Tensor g = random_f32(rows * cols, rng, 1.0).reshape({rows, cols});
    Tensor ref = Tensor::empty({rows, cols}, DType::f32);
    ops::newton_schulz(g, ref, 5, Tensor::empty({ops::newton_schulz_workspace_numel(rows, cols)}, DType::f32));
    for (DType precision : {DType::f32, DType::bf16}) {
      Tensor dg = Tensor::empty({rows, cols}, DType::f32, Device::cuda);
      dg.copy_from(g);
      Tensor out = Tensor::empty({rows, cols}, DType::f32, Device::cuda);
      ops::newton_schulz(dg, out, 5,
                         Tensor::empty({ops::newton_schulz_workspace_numel(rows, cols)}, precision, Device::cuda));
      expect_close("Newton-Schulz " + std::string(dtype_name(precision)) + " " + std::to_string(rows) + "x" +
                       std::to_string(cols),
                   ref, out, precision == DType::f32 ? 1e-4 : 3e-2);
      ops::newton_schulz(dg, dg, 5,
                         Tensor::empty({ops::newton_schulz_workspace_numel(rows, cols)}, precision, Device::cuda));
      EXPECT_TRUE(same_bits(out, dg)) << "in place differs from out of place";
    }
  }
}

TEST_F(GpuTest, MuonMatchesTheCpu) {
  Twins t;
  const Tensor start = t.cpu.values().clone();
  const OptimizerConfig config = config_of(OptimizerKind::muon);
  Muon cpu(config), gpu(config);
  for (int step = 0; step < 3; ++step) {
    t.next_grads();
    cpu.step(t.cpu, 0.02);
    gpu.step(t.gpu, 0.02);
  }
  for (size_t i = 0; i < t.cpu.params().size(); ++i) {
    const Parameter& p = t.cpu.params()[i];
    const Tensor before = start.slice(p.offset, p.offset + shape_numel(p.shape));
    if (takes_muon(p)) {  // the update θ − θ₀, which bf16 Newton–Schulz rounds
      Tensor cpu_update = p.value.clone(), gpu_update = t.gpu.params()[i].value.clone();
      for (int64_t k = 0; k < cpu_update.numel(); ++k) {
        cpu_update.data<float>()[k] -= before.data<float>()[k];
        gpu_update.data<float>()[k] -= before.data<float>()[k];
      }
      expect_close("Muon (bf16 NS) update of " + p.name, cpu_update, gpu_update, 3e-2);
    } else {
      expect_close("Muon's AdamW for " + p.name, p.value, t.gpu.params()[i].value, 1e-6);
    }
  }
}

TEST_F(GpuTest, GradientNormAndClipping) {
  Twins t;
  t.next_grads(1.0);
  const double cpu_norm = grad_norm(t.cpu), gpu_norm = grad_norm(t.gpu);
  std::printf("measured gradient norm: cpu %.17g gpu %.17g (relative difference %.3g)\n", cpu_norm, gpu_norm,
              std::abs(cpu_norm - gpu_norm) / cpu_norm);
  EXPECT_NEAR(gpu_norm, cpu_norm, 1e-12 * cpu_norm);
  EXPECT_EQ(grad_norm(t.gpu), gpu_norm) << "the device sum must be the same on every run";
  EXPECT_EQ(ops::sums_of_squares({Tensor::zeros({0}, DType::f32, Device::cuda)})[0], 0.0);
  std::vector<Tensor> grads;  // per parameter, with one synchronisation
  for (const Parameter& p : t.gpu.params()) grads.push_back(p.grad);
  const std::vector<double> each = ops::sums_of_squares(grads);
  for (size_t i = 0; i < grads.size(); ++i) {
    EXPECT_EQ(each[i], ops::sums_of_squares({grads[i]})[0]) << i;
    EXPECT_NEAR(each[i], ops::sums_of_squares({t.cpu.params()[i].grad})[0], 1e-12 * each[i]) << i;
  }

  const double max_norm = cpu_norm / 3;
  EXPECT_EQ(clip_grad_norm(t.cpu, max_norm), cpu_norm);
  EXPECT_EQ(clip_grad_norm(t.gpu, max_norm), gpu_norm);
  expect_close("clipped gradients", t.cpu.grads(), t.gpu.grads(), 1e-6);
  EXPECT_NEAR(grad_norm(t.gpu), max_norm, 1e-6 * max_norm);
  EXPECT_THROW(ops::sums_of_squares({Tensor::zeros({4}, DType::bf16, Device::cuda)}), std::invalid_argument);
}

// Export after two steps, import into a fresh optimizer, and both continue with the same bits.
void check_round_trip(OptimizerKind kind) {
  Twins t;
  const OptimizerConfig config = config_of(kind);
  std::unique_ptr<Optimizer> first = make_optimizer(config), second = make_optimizer(config);
  for (int step = 0; step < 2; ++step) {
    t.next_grads();
    first->step(t.gpu, 0.02);
  }
  const OptimizerState state = first->export_state();
  for (const auto& [name, tensor] : state.tensors) ASSERT_EQ(tensor.device(), Device::cpu) << name;
  second->import_state(state, t.gpu);
  EXPECT_EQ(second->step_count(), 2);
  t.next_grads();
  const Tensor start = t.gpu.values().clone();
  first->step(t.gpu, 0.02);
  const Tensor after_first = t.gpu.values().clone();
  Tensor(t.gpu.values()).copy_from(start);
  second->step(t.gpu, 0.02);
  EXPECT_TRUE(same_bits(after_first, t.gpu.values())) << optimizer_kind_name(kind);
  const OptimizerState a = first->export_state(), b = second->export_state();
  for (const auto& [name, tensor] : a.tensors) EXPECT_TRUE(same_bits(tensor, b.tensors.at(name))) << name;
}

TEST_F(GpuTest, StateRoundTripsThroughTheHost) {
  check_round_trip(OptimizerKind::adamw);
  check_round_trip(OptimizerKind::muon);
}

TEST_F(GpuTest, OneRankDistributedOptimizerIsThePlainOptimizer) {
  for (OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::muon}) {
    for (bool zero : {false, true}) {
      Twins a, b;  // equal sets: one for each optimizer
      LocalCommunicator dp("dp", Device::cuda);
      OptimizerConfig config = config_of(kind);
      config.grad_clip = 0.5;
      DistributedOptimizer distributed(config, b.gpu, dp, zero);
      std::unique_ptr<Optimizer> plain = make_optimizer(config);
      for (int step = 0; step < 2; ++step) {
        a.next_grads();
        b.next_grads();
        // The norm adds per-parameter sums here, one sum over the flat buffer there.
        const double norm = clip_grad_norm(a.gpu, config.grad_clip);
        EXPECT_NEAR(distributed.reduce_gradients(), norm, 1e-12 * norm);
        plain->step(a.gpu, 0.02);
        distributed.step(0.02);
      }
      const std::string what = "one-rank DistributedOptimizer " + std::string(optimizer_kind_name(kind)) +
                               (zero ? " zero" : "") + " vs plain";
      expect_close(what, a.gpu.values(), b.gpu.values(), 1e-6);
      for (const CheckpointTensor& block : distributed.held_state()) EXPECT_EQ(block.data.device(), Device::cuda);
    }
  }
  ParameterSet cpu;
  declare(cpu);
  LocalCommunicator gpu_dp("dp", Device::cuda);
  EXPECT_THROW(DistributedOptimizer(config_of(OptimizerKind::adamw), cpu, gpu_dp, false), std::invalid_argument);
}

TEST_F(GpuTest, BadOperandsAreRefused) {
  const Tensor a = Tensor::zeros({8}, DType::f32, Device::cuda), host = Tensor::zeros({8}, DType::f32);
  const AdamWCoefficients c;
  EXPECT_THROW(ops::adamw_update(a, host, a, a, c), std::invalid_argument);
  EXPECT_THROW(ops::adamw_update(a, a, a, Tensor::zeros({7}, DType::f32, Device::cuda), c), std::invalid_argument);
  const Tensor f64 = Tensor::zeros({8}, DType::f64, Device::cuda);
  EXPECT_THROW(ops::adamw_update(f64, f64, f64, f64, c), std::invalid_argument);
  EXPECT_THROW(ops::nesterov_momentum(a, host, a, 0.9), std::invalid_argument);
  const Tensor m = Tensor::zeros({2, 4}, DType::f32, Device::cuda);
  EXPECT_THROW(ops::newton_schulz(m, m, 5, Tensor::zeros({64}, DType::f64, Device::cuda)), std::invalid_argument);
  EXPECT_THROW(
      ops::newton_schulz(m, Tensor::zeros({2, 4}, DType::f32), 5, Tensor::zeros({64}, DType::f32, Device::cuda)),
      std::invalid_argument);
}

}  // namespace
}  // namespace linea
