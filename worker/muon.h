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
  Tensor update_;        // the Nesterov input, then its orthogonalisation, for one matrix at a time
  Tensor ns_workspace_;  // newton_schulz() scratch, sized for the largest matrix
};

}  // namespace linea
