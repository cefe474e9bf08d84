// ordered_reduce: the deterministic reduction behind MpiCommunicator's all_reduce and
// reduce_scatter (CPU reference and implementation).
//
// Given the R ranks' contributions to n elements, stored rank after rank (in[r·n + i]):
//   out[i] = T( (Σ_{r=0}^{R−1} A(in[r·n + i])) [/ R for avg] )
// with the sum taken in rank order r = 0, 1, …, R−1 in the accumulator A (double for f32, f64 and
// bf16; int64 for i32 and i64), divided by R once for avg, then rounded once to T (bf16 via f32).
// The order never depends on timing, threads or on which rank computes it, so every rank and every
// run gets the same bits. out may alias any one contribution.
#pragma once
#include <cstdint>

#include "kernels/dtype.h"
#include "parallel/collective_call.h"

namespace linea {

template <class T>
void ordered_reduce(const T* in, int ranks, int64_t n, ReduceOp op, T* out);

// Dispatches on dtype (f32, f64, bf16, i32, i64). avg needs a floating dtype.
void ordered_reduce(DType dtype, const void* in, int ranks, int64_t n, ReduceOp op, void* out);

}  // namespace linea
