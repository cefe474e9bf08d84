// Token embedding lookup and its gradient. ids[n] must lie in [0, V) (the caller checks).
//   forward:  out[n, :] = table[ids[n], :]
//   backward: dtable[ids[n], :] += dout[n, :]   (rows of one id are added in increasing n)
#pragma once
#include <cstdint>

namespace linea::cpu {

template <class T>
void embedding_forward(T* out, const T* table, const int32_t* ids, int64_t n, int64_t d);
template <class T>
void embedding_backward(T* dtable, const T* dout, const int32_t* ids, int64_t n, int64_t d);

}  // namespace linea::cpu
