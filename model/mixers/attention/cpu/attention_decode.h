// CPU softmax attention of new queries over KV caches (decoding; ops::attention_over_cache in
// model/mixers/attention/attention.h states the math): query t of sequence queries[2t] at position
// p = queries[2t + 1] reads the cached rows of the positions j with p − window < j ≤ p (window 0:
// all j ≤ p), position j of sequence s at row s·C + j mod C; GQA as ops::attention_forward (query
// head h reads kv head h / (Hq / Hkv)). Scores and sums in f64, rounded once to T.
// q, out: [n, Hq·Dh]; k, v: [S, C, Hkv·Dh]. Templates over float and double.
#pragma once
#include <cstdint>

#include "model/mixers/attention/attention.h"

namespace linea::cpu {

template <class T>
void attention_over_cache(T* out, const T* q, const int32_t* queries, int64_t n, const T* k, const T* v,
                          int64_t capacity, const ops::AttentionShape& shape);

}  // namespace linea::cpu
