// ops::attention_forward / attention_backward: causal softmax attention (GQA, optional sliding
// window) over packed sequences, the op of the attention mixer family. Checks its arguments and
// dispatches on device and dtype as every op of kernels/ops.h (whose conventions it follows): the
// CPU reference in cpu/attention.h (f32, f64); on CUDA, cuDNN's fused attention (bf16) or the own
// flash kernels in cuda/attention.h (f32, bf16), as cuda/attention_routing.h decides.
#pragma once
#include <cstdint>

#include "kernels/seq_layout.h"
#include "kernels/tensor.h"

namespace linea::ops {

// q: [N, Hq·Dh], k, v: [N, Hkv·Dh] (Hq a multiple of Hkv; query head h reads kv head h/(Hq/Hkv)).
// o_t = Σ_{s ∈ window(t)} softmax_s(scale · q_t·k_s) v_s, where window(t) = the tokens s ≤ t of t's
// sequence with t − s < window (window 0 = unlimited). out: [N, Hq·Dh]; lse: f32/f64 [N, Hq]
// (log-sum-exp of the scaled scores, saved for backward).
// backend: which CUDA implementation serves it (the CPU ignores it): cuDNN's fused flash
// attention where it supports the call, else the own kernels, with one log line saying which and
// why (automatic); cuDNN, an error where it cannot (cudnn); the own kernels (own).
// cudnn_autotune: on cuDNN, time the execution plans of the engine configurations cuDNN's
// heuristics offer on the first call of each shape and keep the fastest (true), or take the
// heuristics' first (false); either way the results are those of the same math
// (model/mixers/attention/cuda/cudnn_attention.h).
enum class AttentionBackend { automatic, cudnn, own };
struct AttentionShape {
  int64_t q_heads = 1, kv_heads = 1, head_dim = 1, window = 0;
  double scale = 1.0;
  AttentionBackend backend = AttentionBackend::automatic;
  bool cudnn_autotune = false;
};
void attention_forward(Tensor out, Tensor lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionShape& shape, const SeqLayout& seqs);
// dq, dk, dv overwritten
void attention_backward(Tensor dq, Tensor dk, Tensor dv, const Tensor& dout, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& out, const Tensor& lse, const AttentionShape& shape,
                        const SeqLayout& seqs);

// Decoding: softmax attention of new queries over per-sequence KV caches
// (model/mixers/attention/attention_decode.cpp). k_cache, v_cache: [S, C, Hkv·Dh], the rotated key and
// value of position p of sequence s at row p mod C of s; queries: i32 [N, 2] on the host, query t's
// sequence s_t and position p_t. For every query head h (kv head h / (Hq/Hkv)):
//   out[t, h] = Σ_j softmax_j(scale · q[t, h]·k_j) v_j over the positions j of s_t with
//               p_t − window < j ≤ p_t (window 0: 0 ≤ j ≤ p_t),
// each of which the caller has stored in the cache (the keys a query sees must fit in C rows).
// q, out: [N, Hq·Dh]. CPU: f32 or f64, scores and sums in f64 (cpu/attention_decode.h); CUDA: f32 or
// bf16 with f32 arithmetic, head_dim ≤ 256 (cuda/attention_decode.h).
void attention_over_cache(Tensor out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                          const Tensor& queries, const AttentionShape& shape);

}  // namespace linea::ops
