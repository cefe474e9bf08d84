// AdamW (decoupled weight decay), as torch.optim.AdamW. At step t ≥ 1, for every element:
//   θ ← θ·(1 − lr·λ)                                   (λ = 0 for parameters without weight decay)
//   m ← β1·m + (1 − β1)·g          v ← β2·v + (1 − β2)·g²
//   θ ← θ − (lr / (1 − β1^t)) · m / (sqrt(v) / sqrt(1 − β2^t) + eps)
// A parameter takes weight decay when Parameter::weight_decay is set (not for norms, biases and
// gates), except embeddings, which take it only when config.decay_embeddings is set.
// State: "adamw.m/<name>" and "adamw.v/<name>".
#pragma once
#include "kernels/adamw_coefficients.h"
#include "kernels/optimizer_math.h"
#include "worker/optimizer.h"
#include "worker/param_buffers.h"

namespace linea {

bool takes_weight_decay(const Parameter& p, const OptimizerConfig& config);

AdamWCoefficients adamw_coefficients(const OptimizerConfig& config, double lr, int64_t t, bool weight_decay);

// The update itself is ops::adamw_update (kernels/optimizer_math.h), on any run of elements: every
// element is updated on its own, so updating a parameter piece by piece gives the same bits as all
// at once.

// The AdamW update of the parameters `selected` accepts, with its m and v buffers; the step count
// belongs to the optimizer that holds it (AdamW itself, or Muon for its non-matrix parameters).
class AdamWRule {
 public:
  AdamWRule(const OptimizerConfig& config, ParamSelector selected);
  // t: the 1-based number of this step, for the bias corrections.
  void apply(ParameterSet& params, double lr, int64_t t);
  ParamBuffers& m() { return m_; }
  ParamBuffers& v() { return v_; }
  const ParamBuffers& m() const { return m_; }
  const ParamBuffers& v() const { return v_; }

 private:
  OptimizerConfig config_;
  ParamSelector selected_;
  ParamBuffers m_, v_;
};

class AdamW final : public Optimizer {
 public:
  explicit AdamW(const OptimizerConfig& config);
  OptimizerKind kind() const override { return OptimizerKind::adamw; }
  void step(ParameterSet& params, double lr) override;
  int64_t step_count() const override { return step_; }
  OptimizerState export_state() const override;
  void import_state(const OptimizerState& state, const ParameterSet& params) override;

 private:
  AdamWRule rule_;
  int64_t step_ = 0;
};

}  // namespace linea
