// The delta-rule family (DeltaNet, Gated DeltaNet, Kimi Delta Attention, Gated DeltaNet-2) as one
// parameterized op. Per head, with state S ∈ R^{K×V} and the most general (GDN-2) form
//
//   S' = Diag(exp(g_t)) S_{t-1}                (decay: none, one scalar per head, or per key channel)
//   u  = w_t ⊙ v_t − S'ᵀ (b_t ⊙ k_t)           (erase gate b ∈ R^K, write gate w ∈ R^V)
//   S_t = S' + k_t uᵀ,      o_t = scale · S_tᵀ q_t
//
// GateKind::beta sets b = β·1 and w = β·1 (DeltaNet, GDN, KDA). See reference/mixers.md §1–§2.
// Two implementations with identical results: `recurrent` (token by token, the readable
// reference) and `chunked` (C = 64, the WY/UT-transform algorithm). q and k are used as given
// (the caller L2-normalises them). The state restarts at every sequence of `seqs`; h0 and ht hold
// one state per sequence.
//
// Layout (fla's, flattened over tokens): q, k: [N, H, K]; v: [N, H, V]; beta: [N, H];
// b: [N, H, K]; w: [N, H, V]; g: [N, H] (scalar decay) or [N, H, K] (channel decay), undefined for
// none; h0, ht: [S, H, K, V] (h0 may be undefined = zeros). All f32 or all f64 on the CPU. On a CUDA
// device (K ≤ 256): token operands bf16 or f32, g and the states f32; the chunked op forward and
// backward, the recurrent op forward only (token by token, decoding's one-token step), without the
// write error r (model/mixers/delta_rule/cuda/delta_rule.h). The recurrent forward may update a
// state in place: ht may be h0 itself.
#pragma once
#include <cstddef>

#include "kernels/seq_layout.h"
#include "kernels/tensor.h"

namespace linea::ops {

enum class DecayKind { none, scalar, channel };
enum class GateKind { beta, erase_write };
enum class DeltaRuleImpl { recurrent, chunked };

struct DeltaRuleSpec {
  DecayKind decay = DecayKind::none;
  GateKind gate = GateKind::beta;
  double scale = 1.0;
};

struct DeltaRuleInputs {
  Tensor q, k, v;
  Tensor beta;  // GateKind::beta
  Tensor b, w;  // GateKind::erase_write
  Tensor g;     // DecayKind::scalar or channel
  Tensor h0;    // optional
};

// Gradients of every input (overwritten). Fields that do not apply to the spec stay undefined;
// dh0 is written whenever it is defined.
struct DeltaRuleGrads {
  Tensor dq, dk, dv, dbeta, db, dw, dg, dh0;
};

// What a forward can save for its backward, which then does not recompute it: on CUDA, the bf16
// tensor-core pipeline's chunk intermediates and per-chunk states (model/mixers/delta_rule/cuda/
// delta_rule_bf16.cuh). delta_rule_saved_bytes is the size of `saved`, 0 where a call saves nothing
// (the CPU; f32 calls; bf16 shapes that pipeline does not take), and then `saved` stays undefined.
// Pass the same `saved` (a tensor of at least that many bytes on q's device, any dtype, 256-byte
// aligned as arenas hand them out) to the forward and then to the backward of the same inputs.
size_t delta_rule_saved_bytes(const DeltaRuleSpec& spec, const SeqLayout& seqs, const DeltaRuleInputs& in);

// o: [N, H, V], ht: [S, H, K, V] (may be undefined to skip).
// r: [N, H, V], optional: the write error of every token (reference/mixers.md §5.1), what the
// prediction from the decayed previous state S' misses, r_t = τ_t − S'ᵀρ_t with ρ = k, τ = v for
// GateKind::beta (so u = β r, r formed without dividing by β) and ρ = b ⊙ k, τ = w ⊙ v for
// erase_write (r = u). For cross-layer routing (model/routing.h). On CUDA a call with r (or dr)
// runs the f32 pipeline (on f32 copies of bf16 operands) and saves nothing: leave `saved` undefined.
void delta_rule_forward(DeltaRuleImpl impl, const DeltaRuleSpec& spec, const SeqLayout& seqs, const DeltaRuleInputs& in,
                        Tensor o, Tensor ht, Tensor r = Tensor(), Tensor saved = Tensor());
// Gradients of the loss L with ∂L/∂o = d_o, ∂L/∂ht = dht and ∂L/∂r = dr (dht, dr may be undefined
// = zeros). Recomputes whatever the forward would have produced, except what it left in `saved`.
void delta_rule_backward(DeltaRuleImpl impl, const DeltaRuleSpec& spec, const SeqLayout& seqs,
                         const DeltaRuleInputs& in, const Tensor& d_o, const Tensor& dht, DeltaRuleGrads& grads,
                         const Tensor& dr = Tensor(), const Tensor& saved = Tensor());

}  // namespace linea::ops
