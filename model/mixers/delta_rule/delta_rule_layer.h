// DeltaRuleLayer: one layer class for DeltaNet, Gated DeltaNet, KDA and Gated DeltaNet-2
// (reference/mixers.md §1.1–§1.4), H heads of key width K = d_k and value width V = d_v:
//
//   q, k, v = W_q x, W_k x, W_v x                      (D → H·K, H·K, H·V)
//   q, k, v ← silu(ShortConv(·))                        (when conv > 0; no conv → used as projected)
//   q, k ← L2Norm per head (eps 1e-6);  scale = 1/√K
//   gates   DeltaNet, GDN, KDA: β = s·σ(W_b x) ∈ R^H,  s = 2 if allow_neg_eigval else 1
//           GDN-2:              b = s·σ(W_b x) ∈ R^{H·K} (erase), w = σ(W_w x) ∈ R^{H·V} (write)
//   decay   DeltaNet: none
//           GDN:      g = −exp(A_log)·softplus(W_a x + dt_bias) ∈ R^H        (A_log, dt_bias: [H])
//           KDA/GDN-2: g = −exp(A_log)·softplus(W_f2 W_f1 x + dt_bias) ∈ R^{H·K} (A_log: [H],
//                      dt_bias: [H·K]; W_f1: decay_rank × D, W_f2: H·K × decay_rank)
//   o = delta_rule(q, k, v, gates, g)                  (ops::delta_rule_*, chunked)
//   y = RMSNorm_per_head(o) · γ ⊙ act(z)               (γ: [V])
//           DeltaNet: no gate (output_gate = true: SiLU with z = W_g x)
//           GDN:      SiLU, z = W_g x
//           KDA/GDN-2: sigmoid, z = W_g2 W_g1 x + b_g (gate_rank inner width)
//           output_gate = false: plain per-head RMSNorm
//   out = W_o y                                         (H·V → D)
// Cross-layer routing (model/routing.h, reference/mixers.md §5.2), when the model gives the layer a
// part in it; r is the delta rule's write error (ops::delta_rule_forward), ṽ its written value
// (β ⊙ v, or w ⊙ v for GDN-2), both per head:
//   CLER sender:   r goes to the receiver's link; ∂L/∂r comes back from it (unless stop_grad)
//   CLER receiver: v ← v + λ ⊙ Π(r_sender) after the conv + SiLU; λ: cler_lambda [H·V] (gate role,
//                  AdamW); Π the identity per head when the sender has the same heads and d_v,
//                  else (or with projection = "linear") cler_proj [H·V, H_s·V_s] (matrix, Muon;
//                  TP = 1 only). λ starts at 0, or at 1 with Π (Π starts at 0, and λ = Π = 0 would
//                  give neither a gradient).
//   CLER-H:        out += W_E RMSNorm_per_head(r) · γ_E;  W_E: cler_h_proj [D, H·V] (matrix, zero),
//                  γ_E: cler_h_norm.weight [V] (vector, one)
//   CLVR:          out += W_V ṽ;  W_V: clvr_proj [D, H·V] (matrix, zero)
// W_E and W_V are row-parallel like o_proj, λ (and Π's rows) sharded by head like v.
// Parameter names follow fla (q_proj, q_conv1d, a_proj, b_proj, w_proj, f_proj.0/1, g_proj, A_log,
// dt_bias, o_norm, o_proj); roles follow mixers.md §6.3.
// Precision: everything runs in the step's dtype on the compute weights, except the decay gate,
// which runs in the master dtype (f32 in bf16 training: the delta rule's g is f32) on the master
// A_log and dt_bias, whose gradients go straight into the master gradients.
//
// Heads are independent, so under tensor parallelism a rank holds heads tp.split_evenly(H) and
// everything of them: rows of every projection into them (q, k, v, b, w, a, f_proj.1, g_proj.1 and
// its bias), their A_log, dt_bias and conv channels, and the columns of o_proj out of them; out
// and dx are then this rank's terms of sums over the group. Whole on every rank: o_norm's γ
// (shared by the heads) and the first factors f_proj.0, g_proj.0, whose gradients are partial
// (Parameter::partial_grad).
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "kernels/ops.h"
#include "model/head_norm_output.h"
#include "model/linear.h"
#include "model/low_rank_linear.h"
#include "model/mixer.h"
#include "model/mixers/delta_rule/delta_rule.h"
#include "model/mixers/delta_rule/delta_rule_config.h"
#include "model/mixers/delta_rule/delta_rule_decode_state.h"
#include "model/routing.h"
#include "model/short_conv.h"
#include "model/tensor_parallel.h"

namespace linea {

class DeltaRuleLayer final : public RunMixer<DeltaRuleDecodeState> {
 public:
  // config: resolved (DeltaRuleConfig::resolve); its preset says which mixer the layer is.
  DeltaRuleLayer(ParameterSet& params, const std::string& name, int64_t d_model, const DeltaRuleConfig& config,
                 double norm_eps, const TensorParallel& tp = {}, const LayerRouting* routing = nullptr);

  void init(Rng& rng, double std) override;
  void backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) override;
  // Decoding (delta_rule_decode.cpp): the state S [S, H, K, V] and the convs' input histories.
  std::unique_ptr<MixerState> start_state(int64_t sequences) const override;

 private:
  // forward, from empty states (state null: training) or continuing `state`.
  Tensor run(StepContext& ctx, const Tensor& x, DeltaRuleDecodeState* state) override;
  // The delta rule's operands, recomputed from what forward keeps (cheap elementwise work: conv,
  // SiLU, L2 norm, decay gate), in ctx.scratch; with the L2 norms' rstd for their backward.
  struct Operands {
    ops::DeltaRuleInputs in;
    Tensor q_rstd, k_rstd;
  };
  Operands operands(StepContext& ctx, DeltaRuleDecodeState* state = nullptr);
  // Routing (see above): whether the delta rule's write error r is needed; Π(r_sender) or
  // r_sender (CLER receiver); ṽ (CLVR); RMSNorm(r) · γ_E with its rstd (CLER-H).
  bool needs_write_error() const;
  Tensor received(StepContext& ctx);
  Tensor written_value(StepContext& ctx, const Operands& op);
  Tensor normed_error(StepContext& ctx, Tensor& rstd);

  DeltaRuleConfig config_;
  double norm_eps_;
  ops::DeltaRuleSpec spec_;
  ops::GateActivation output_act_;
  double erase_scale_;                       // 2 when negative eigenvalues are allowed
  HeadShard shard_;                          // the heads this rank holds
  int64_t heads_, key_width_, value_width_;  // H, H·K, H·V of this rank

  Linear q_proj_, k_proj_, v_proj_;
  std::optional<Linear> a_proj_;         // GDN decay input
  std::optional<LowRankLinear> f_proj_;  // KDA/GDN-2 decay input
  Linear b_proj_;                        // β (D → H) or GDN-2's erase gate (D → H·K)
  std::optional<Linear> w_proj_;         // GDN-2's write gate
  Parameter* A_log_ = nullptr;
  Parameter* dt_bias_ = nullptr;
  std::optional<ShortConv> q_conv_, k_conv_, v_conv_;
  std::optional<Linear> g_proj_;                 // full-rank output gate (DeltaNet, GDN)
  std::optional<LowRankLinear> g_proj_lowrank_;  // low-rank output gate with bias (KDA, GDN-2)
  HeadNormOutput output_;                        // o_norm and o_proj

  LayerRouting routing_;
  Parameter* cler_lambda_ = nullptr;   // CLER receiver
  std::optional<Linear> cler_proj_;    // CLER receiver, Π as a linear map
  Parameter* cler_h_norm_ = nullptr;   // CLER-H
  std::optional<Linear> routed_proj_;  // CLER-H's W_E or CLVR's W_V

  // Kept by forward for backward (in ctx.activations): the projections, the gates, the delta
  // rule's output and the output gate's input. Everything between (conv + SiLU outputs, the
  // L2-normed q and k, the log decay g, the normed output y that feeds o_proj, the rstds) is
  // recomputed by backward from these.
  Tensor q_in_, k_in_, v_in_;  // projections, before conv
  Tensor beta_;                // β [N, H] (GateKind::beta)
  Tensor erase_, write_;       // b [N, H·K], w [N, H·V] (GateKind::erase_write)
  Tensor decay_in_;            // W_a x or W_f x, in the master dtype
  Tensor z_;                   // output-gate input (undefined without gate)
  Tensor o_;                   // the delta rule's output [N, H·V]
  Tensor r_;                   // its write error [N, H·V] (CLER-H and CLER senders)
  Tensor saved_;               // what the op's forward keeps for its backward (unless config recompute)
};

}  // namespace linea
