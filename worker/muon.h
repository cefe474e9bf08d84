// Muon (reference/mixers.md §6.2–6.3) for ParamRole::matrix parameters, AdamW for all others.
//
// Each matrix W (m × n, 2-D) is orthogonalised as its own matrix. With gradient g, momentum B and
// μ = config.muon_momentum (Nesterov, Moonlight/PyTorch convention):
//   B ← μ·B + g,   O = NewtonSchulz(g + μ·B, config.ns_steps)
//   W ← W·(1 − lr·λ) − lr · 0.2·sqrt(max(m, n)) · O        (match_rms_adamw; λ = 0 without decay)
// Every other parameter takes the AdamW update with the same lr, betas, eps and weight decay.
// State: "muon.momentum/<name>" for the matrices, "adamw.m/<name>" and "adamw.v/<name>" for the rest.
#pragma once
#include "worker/adamw.h"
#include "worker/optimizer.h"
#include "worker/param_buffers.h"

namespace linea {

// Whether Muon (rather than AdamW) updates p: the ParamRole::matrix parameters.
bool takes_muon(const Parameter& p);

// The steps of one matrix's update, shared with DistributedOptimizer (which gathers a matrix
// sharded over TP between them).
// The momentum step is ops::nesterov_momentum (kernels/optimizer_math.h); then:
// θ ← θ·decay_factor − lr · 0.2·sqrt(max(rows, cols)) · o, for a rows × cols matrix (or the part of
// it that theta and o hold).
void muon_apply(const Tensor& theta, const Tensor& o, double lr, double decay_factor, int64_t rows, int64_t cols);

// Scratch for orthogonalising one matrix at a time, grown to the largest matrix seen. On the CPU
// Newton–Schulz runs in the matrix's dtype; on a GPU its GEMMs take gpu_precision operands (bf16
// by default, accumulating in f32; or f32), kernels/cuda/newton_schulz.h.
class MuonScratch {
 public:
  explicit MuonScratch(DType gpu_precision = DType::bf16) : gpu_precision_(gpu_precision) {}
  // A [rows, cols] tensor of scratch memory for the Nesterov input (valid until the next call).
  Tensor input(int64_t rows, int64_t cols, DType dtype, Device device);
  // u ← NewtonSchulz(u, steps), in place; u from input().
  void orthogonalise(const Tensor& u, int steps);

 private:
  DType gpu_precision_;
  Tensor input_;
  Tensor workspace_;  // newton_schulz() scratch
};

class Muon final : public Optimizer {
 public:
  explicit Muon(const OptimizerConfig& config);
  OptimizerKind kind() const override { return OptimizerKind::muon; }
  // Throws std::invalid_argument, before changing anything, if a matrix parameter is not 2-D.
  void step(ParameterSet& params, double lr) override;
  int64_t step_count() const override { return step_; }
  OptimizerState export_state() const override;
  void import_state(const OptimizerState& state, const ParameterSet& params) override;

 private:
  void check_matrices(const ParameterSet& params) const;
  void update_matrix(Parameter& p, const Tensor& momentum, double lr);
  OptimizerConfig config_;
  ParamBuffers momentum_;
  AdamWRule adamw_;
  int64_t step_ = 0;
  MuonScratch scratch_;
};

}  // namespace linea
