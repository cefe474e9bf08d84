// The gated-linear-attention family (GLA, RetNet, HGRN-2, Mamba-2/SSD, RWKV-6) as one parameterized
// op (reference/mixers.md §1.5–1.10). Per head, with state S ∈ R^{K×V}:
//
//   S_t = Diag(exp(g_t)) S_{t−1} + k_t v_tᵀ
//   after_write:         o_t = scale · S_tᵀ q_t
//   before_write_bonus:  o_t = scale · (S_{t−1}ᵀ q_t + (q_t · (u ⊙ k_t)) v_t)      (RWKV-6)
//
// The log decay g ≤ 0 is one value per key channel (GlaDecay::channel: GLA, HGRN-2, RWKV-6), one per
// token and head (scalar: Mamba-2), or one fixed value per head (head: RetNet's log(1 − 2^{−5−h})).
// The key is given, or tied to the decay as k_t = 1 − exp(g_t) (GlaKey::one_minus_decay: HGRN-2).
// Two implementations with identical results: `recurrent` (token by token, the readable reference)
// and `chunked` (C = 64, kernels/chunk/). The state restarts at every sequence of `seqs`; h0 and ht
// hold one state per sequence. model/mixers/gla/presets.h names the five mixers' specs.
//
// Layout (fla's, flattened over tokens): q: [N, H, K]; k: [N, H, K] (undefined when tied to g);
// v: [N, H, V]; g: [N, H, K] (channel), [N, H] (scalar) or [H] (head); u: [H, K] (bonus readout
// only, else undefined); h0, ht: [S, H, K, V] (h0 may be undefined = zeros). All f32 or all f64 on
// the CPU. On a CUDA device (K ≤ 256; the recurrent forward runs token by token, decoding's one-token
// step, everything else the chunked kernels): q, k, v, o, d_o and their gradients bf16 or f32; g, u,
// the states and their gradients f32 (model/mixers/gla/cuda/gla.h). The recurrent forward may update
// a state in place: ht may be h0 itself.
#pragma once
#include <cstddef>

#include "kernels/seq_layout.h"
#include "kernels/tensor.h"

namespace linea::ops {

enum class GlaDecay { channel, scalar, head };
enum class GlaKey { given, one_minus_decay };
enum class GlaReadout { after_write, before_write_bonus };
enum class GlaImpl { recurrent, chunked };

struct GlaSpec {
  GlaDecay decay = GlaDecay::channel;
  GlaKey key = GlaKey::given;  // one_minus_decay needs GlaDecay::channel
  GlaReadout readout = GlaReadout::after_write;
  double scale = 1.0;
};

struct GlaInputs {
  Tensor q, k, v, g;
  Tensor u;   // GlaReadout::before_write_bonus
  Tensor h0;  // optional
};

// Gradients of every input (overwritten). dk is undefined when the key is tied to g (its gradient
// flows into dg); dg is undefined for GlaDecay::head (a fixed decay has no gradient); du only with
// the bonus readout; dh0 is written whenever it is defined.
struct GlaGrads {
  Tensor dq, dk, dv, dg, du, dh0;
};

// What a chunked forward can save for its backward, which then does not recompute it: on CUDA, the
// calls that run on the delta rule's bf16 pipeline as its plain write (model/mixers/gla/cuda/gla.h)
// save that pipeline's chunk intermediates and per-chunk states, as ops::delta_rule_saved_bytes
// does (model/mixers/delta_rule/delta_rule.h). gla_saved_bytes is the size of `saved`, 0 where a
// call saves nothing (the CPU; f32 calls; bf16 shapes that pipeline does not take), and then
// `saved` stays undefined (a call given one anyway refuses it). Pass the same
// `saved` (at least that many bytes on q's device, any dtype, 256-byte aligned as arenas hand them
// out) to the chunked forward and then to the backward of the same inputs.
size_t gla_saved_bytes(const GlaSpec& spec, const SeqLayout& seqs, const GlaInputs& in);

// o: [N, H, V], ht: [S, H, K, V] (may be undefined to skip). saved: see gla_saved_bytes (the
// recurrent forward saves nothing).
void gla_forward(GlaImpl impl, const GlaSpec& spec, const SeqLayout& seqs, const GlaInputs& in, Tensor o, Tensor ht,
                 Tensor saved = Tensor());
// Gradients of the loss L with ∂L/∂o = d_o and ∂L/∂ht = dht (dht may be undefined = zeros).
// Recomputes whatever the forward would have produced, except what it left in `saved`.
void gla_backward(GlaImpl impl, const GlaSpec& spec, const SeqLayout& seqs, const GlaInputs& in, const Tensor& d_o,
                  const Tensor& dht, GlaGrads& grads, const Tensor& saved = Tensor());

}  // namespace linea::ops
