// The bf16 tensor-core pipeline of the CUDA delta rule (model/mixers/delta_rule/cuda/delta_rule_bf16.cuh),
// as model/mixers/delta_rule/cuda/delta_rule.cu calls it: bf16_takes says whether a call is one it
// takes (bf16 token operands of DeltaNet, GDN, KDA or GDN-2, K ≤ 256, V ≤ 512, K and V multiples
// of 8, 16-byte aligned token tensors); bf16_forward and bf16_backward have the contract of
// cuda::delta_rule_forward and cuda::delta_rule_backward (model/mixers/delta_rule/cuda/delta_rule.h)
// for those calls. The pipeline also runs the plain write of the gated-linear-attention family
// (Write::plain: S_t = Diag(exp g_t) S_{t−1} + k_t v_tᵀ, o_t = scale · S_tᵀ q_t, no β, b, w;
// model/mixers/gla/cuda/gla.cu sends it its bf16 calls, spec.gate = beta and grads.dbeta, db, dw
// undefined), RWKV-6's bonus readout among them (Bonus).
#pragma once
#include <cstddef>
#include <initializer_list>

#include "model/mixers/delta_rule/delta_rule.h"

namespace linea::cuda::delta {

// How the keys write into the state: the delta rule's correction, or plainly.
enum class Write { delta, plain };

// RWKV-6's before-write readout with the bonus (Write::plain with a decay per channel only):
// o_t = scale (S_{t−1}ᵀ q_t + (q_t · (u ⊙ k_t)) v_t). u [H, K] f32 on the device (undefined: the
// after-write readout o_t = scale S_tᵀ q_t); du [H, K] f32, the backward's gradient of u
// (overwritten; summed over the chunks in a fixed order: repeatable bit for bit).
struct Bonus {
  Tensor u, du;
};

// `tensors`: the call's other token tensors (o; or d_o and the gradients), checked for alignment
// where defined.
bool bf16_takes(const ops::DeltaRuleSpec& spec, const ops::DeltaRuleInputs& in,
                std::initializer_list<const Tensor*> tensors, Write write);
// The memory of a `saved` buffer handed to the pipeline: null where undefined; refused
// (std::invalid_argument "OP: saved: REFUSAL") where the pipeline does not take the call (`takes`:
// it is the only one that saves) or the memory is not 256-byte aligned.
void* bf16_saved_memory(const Tensor& saved, bool takes, const char* op, const char* refusal);
// The bytes of what the forward can save for the backward with the given write (`saved`: 256-byte
// aligned device memory of that size, or null to save nothing and recompute it in the backward).
size_t bf16_saved_bytes(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in,
                        Write write);
// A backward given `saved` reads what the forward of the same inputs, spec and write left there.
// `bonus` only with Write::plain and a decay per channel.
void bf16_forward(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in, Tensor o,
                  Tensor ht, void* saved, Write write, const Bonus& bonus = {});
void bf16_backward(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in,
                   const Tensor& d_o, const Tensor& dht, ops::DeltaRuleGrads& grads, const void* saved, Write write,
                   const Bonus& bonus = {});

}  // namespace linea::cuda::delta
