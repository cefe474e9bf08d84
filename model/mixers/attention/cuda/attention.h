// Causal softmax attention on CUDA (GQA, sliding window, packed sequences): ops::attention_forward
// and attention_backward (model/mixers/attention/attention.h) after their argument checks, with the same arguments and
// math. q, k, v, out, dout, dq, dk, dv share one dtype, f32 or bf16; lse is f32. Head dims 32, 64
// and 128 (others: std::invalid_argument); bf16 tensors must be 16-byte aligned.
//
// bf16 runs flash kernels on the tensor cores (model/mixers/attention/cuda/attention.cu states the algorithm);
// f32 runs a plain kernel (one warp per row, exact f32 arithmetic) that serves the tests. Both are
// deterministic: no atomics, every output element written by one thread in a fixed order.
#pragma once
#include "model/mixers/attention/attention.h"

namespace linea::cuda {

void attention_forward(Tensor out, Tensor lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const ops::AttentionShape& shape, const SeqLayout& seqs);
// dq, dk, dv overwritten
void attention_backward(Tensor dq, Tensor dk, Tensor dv, const Tensor& dout, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& out, const Tensor& lse, const ops::AttentionShape& shape,
                        const SeqLayout& seqs);

}  // namespace linea::cuda
