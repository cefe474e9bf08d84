// The delta-rule family (model/mixers/delta_rule/delta_rule.h) on CUDA, by chunks of 64 tokens (and, for the
// recurrent forward, token by token: delta_rule_recurrent_forward below): the algorithm of
// model/mixers/delta_rule/cpu/delta_rule_chunked.h, with the same per-chunk math. Called by ops::delta_rule_* after
// their argument checks, when the tensors are on a CUDA device.
//
// Dtypes: q, k, v, beta, b, w, o, d_o and dq, dk, dv, dbeta, db, dw share one dtype, bf16 or f32;
// g and dg are always f32; h0, ht, dht and dh0 are f32. f32 calls run in f32 arithmetic (the chunk
// products on the tensor cores in 3×TF32, kernels/chunk/cuda/block_gemm.cuh; workspaces f32); bf16
// calls on bf16 tensor-core products with f32 accumulation and bf16 workspaces
// (delta_rule_bf16.h), or, for the shapes that pipeline does not take, as f32 calls on f32 copies
// of their operands (delta_rule.cu). Gradients are overwritten (dh0 too). Everything runs on the default stream. Chunks
// never cross a sequence of `seqs`; the state restarts at every sequence (h0, ht: one state per sequence). K ≤ 256; V
// any (tiled across blocks). The sums over a chunk's tokens are in a fixed order: results repeat bit for bit from run
// to run.
#pragma once
#include <cstddef>

#include "model/mixers/delta_rule/delta_rule.h"

namespace linea::cuda {

// The bytes of what a forward can save for its backward (ops::delta_rule_saved_bytes): the bf16
// pipeline's intermediates, 0 for the calls it does not take.
size_t delta_rule_saved_bytes(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in);
// o: [N, H, V]; ht: [S, H, K, V] or undefined; r: [N, H, V], the write error, or undefined (a call
// with r runs the f32 pipeline, on f32 copies for bf16 operands, and saves nothing); saved:
// undefined, or at least delta_rule_saved_bytes.
void delta_rule_forward(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in, Tensor o,
                        Tensor ht, Tensor r, Tensor saved);
// The recurrent form (ops::DeltaRuleImpl::recurrent's forward): token by token, each (sequence, head)
// state held in registers by one block per 32 value columns, read once and written once
// (delta_rule_recurrent.cu); decoding's one-token step. f32 arithmetic; ht may be h0 itself (updated
// in place); at most 65535 sequences.
void delta_rule_recurrent_forward(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in,
                                  Tensor o, Tensor ht);
// Gradients of L with ∂L/∂o = d_o, ∂L/∂ht = dht and ∂L/∂r = dr (undefined = zeros), as the CPU op's
// (a call with dr runs the f32 pipeline, as above); from what the forward saved where `saved` is
// defined.
void delta_rule_backward(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in,
                         const Tensor& d_o, const Tensor& dht, ops::DeltaRuleGrads& grads, const Tensor& dr,
                         const Tensor& saved);

}  // namespace linea::cuda
