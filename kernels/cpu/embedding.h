// Token embedding lookup and its gradient, on a table that holds rows [vocab_begin, vocab_begin + V)
// of the full vocabulary (all of it when vocab_begin = 0 and V is the vocabulary size; a
// vocabulary shard under tensor parallelism). ids[n] ≥ 0 (the caller checks).
//   forward:  out[n, :] = table[ids[n] − vocab_begin, :], or 0 when ids[n] is outside the table
//   backward: dtable[ids[n] − vocab_begin, :] += dout[n, :] for the ids inside the table
//             (rows of one id are added in increasing n)
#pragma once
#include <cstdint>

namespace linea::cpu {

template <class T>
void embedding_forward(T* out, const T* table, const int32_t* ids, int64_t n, int64_t d, int64_t vocab_begin,
                       int64_t v);
template <class T>
void embedding_backward(T* dtable, const T* dout, const int32_t* ids, int64_t n, int64_t d, int64_t vocab_begin,
                        int64_t v);

}  // namespace linea::cpu
