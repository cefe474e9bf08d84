// CPU softmax attention of new queries over one sequence's KV cache (decoding): for query i at
// absolute position p_i = first_query + i,
//   out_i = Σ_j softmax_j(scale · q_i·k_j) v_j  over the cached rows j (row j at position
//   first_key + j) with p_i − window < first_key + j ≤ p_i   (window 0 = unlimited),
// GQA as ops::attention_forward (query head h reads kv head h / (Hq / Hkv)). The cache already
// holds the new tokens' keys and values. Scores and sums in f64, rounded once to T.
// q, out: [n, Hq·Dh]; k, v: [L, Hkv·Dh]. Templates over float and double.
#pragma once
#include <cstdint>

#include "model/mixers/attention/attention.h"

namespace linea::cpu {

template <class T>
void attention_over_cache(T* out, const T* q, int64_t n, int64_t first_query, const T* k, const T* v, int64_t L,
                          int64_t first_key, const ops::AttentionShape& shape);

}  // namespace linea::cpu
