// CPU causal softmax attention (GQA, optional sliding window, packed sequences), by blocks of
// queries whose products with K, V (and dO, Q) are matmuls through OpenBLAS.
// Raw-pointer kernels behind ops::attention_forward/backward (which validate shapes and dtypes);
// the math and layouts are those stated in model/mixers/attention/attention.h. Templates over float and double.
// Every output element is computed by one thread in a fixed order, so results do not depend on
// the number of OpenMP threads.
#pragma once
#include <cstdint>

#include "kernels/seq_layout.h"
#include "model/mixers/attention/attention.h"

namespace linea::cpu {

// out: [N, Hq·Dh], lse: [N, Hq]; q: [N, Hq·Dh], k, v: [N, Hkv·Dh]; N = seqs.num_tokens().
template <class T>
void attention_forward(T* out, T* lse, const T* q, const T* k, const T* v, const ops::AttentionShape& shape,
                       const SeqLayout& seqs);

// Overwrites dq: [N, Hq·Dh] and dk, dv: [N, Hkv·Dh]. Probabilities are recomputed from lse.
template <class T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                        const T* lse, const ops::AttentionShape& shape, const SeqLayout& seqs);

}  // namespace linea::cpu
