// The gated-linear-attention family (model/mixers/gla/gla.h) on CUDA, by chunks of 64 tokens: the
// algorithm of model/mixers/gla/cpu/gla_chunked.h with the same per-chunk math (the kernels are in
// model/mixers/gla/cuda/gla_kernels.cuh). Called by ops::gla_forward / gla_backward after their
// argument checks, when the tensors are on a CUDA device.
//
// Dtypes: q, k, v, o, d_o and dq, dk, dv share one dtype, bf16 or f32; the log decays g, dg, the
// bonus u, du and the states h0, ht, dht, dh0 are f32. Arithmetic is f32 throughout (results are
// rounded to bf16 once, on store), except for the bf16 calls (GLA, HGRN-2, RetNet, Mamba-2, and
// RWKV-6's bonus readout; K, V multiples of 8, K ≤ 256, V ≤ 512, 16-byte aligned token tensors),
// which run on the delta rule's bf16 tensor-core pipeline as its plain write (gla.cu; bf16
// products, f32 accumulators and state). Gradients are overwritten (dh0 too). Everything runs on the default
// stream. Chunks never cross a sequence of `seqs`; the state restarts at every sequence. K ≤ 256
// (kMaxKeyDim), V any. Sums run in a fixed order: results repeat bit for bit.
#pragma once
#include <cstddef>

#include "model/mixers/gla/gla.h"

namespace linea::cuda {

inline constexpr int64_t kGlaMaxKeyDim = 256;

// The bytes of what a forward can save for its backward (ops::gla_saved_bytes): the bf16 pipeline's
// kept buffers for its plain write (delta_rule_bf16.cu, Bf16Sizes: h; a scalar decay's G; a decay
// per channel's G_L, K ⊙ exp(G_L − G), scale Q ⊙ γ and scale P; the segments' transitions), 0 for
// the calls gla_kernels.cuh runs. HGRN-2's tied key is not saved: the backward writes it out again.
size_t gla_saved_bytes(const ops::GlaSpec& spec, const SeqLayout& seqs, const ops::GlaInputs& in);
// o: [N, H, V]; ht: [S, H, K, V] or undefined; saved: undefined, or at least gla_saved_bytes.
void gla_forward(const ops::GlaSpec& spec, const SeqLayout& seqs, const ops::GlaInputs& in, Tensor o, Tensor ht,
                 Tensor saved);
// The recurrent form (ops::GlaImpl::recurrent's forward): token by token, each (sequence, head) state
// held in registers by one block per 32 value columns, read once and written once (gla_recurrent.cu);
// decoding's one-token step. f32 arithmetic; ht may be h0 itself (updated in place); at most 65535
// sequences.
void gla_recurrent_forward(const ops::GlaSpec& spec, const SeqLayout& seqs, const ops::GlaInputs& in, Tensor o,
                           Tensor ht);
// Gradients of L with ∂L/∂o = d_o and ∂L/∂ht = dht (undefined = zeros), as the CPU op's; from what
// the forward saved where `saved` is defined.
void gla_backward(const ops::GlaSpec& spec, const SeqLayout& seqs, const ops::GlaInputs& in, const Tensor& d_o,
                  const Tensor& dht, ops::GlaGrads& grads, const Tensor& saved);

}  // namespace linea::cuda
