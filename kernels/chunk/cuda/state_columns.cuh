// A K×V f32 state held in registers for the token-by-token (recurrent) forms on CUDA: what the
// recurrent kernels of the delta rule and of the gated-linear-attention family share
// (model/mixers/delta_rule/cuda/delta_rule_recurrent.cu, model/mixers/gla/cuda/gla_recurrent.cu),
// decoding's one-token step among them.
//
// A block of kWarps warps takes a tile of 32 columns of one (sequence, head)'s state S (row-major
// [K, V]): lane l holds column c = 32·tile + l, warp w the rows d ≡ w (mod kWarps), kRows =
// ⌈K / kWarps⌉ of them. The state is read once when the block starts and written once when it ends,
// each row's 32 columns in one coalesced 128-byte access, so a step over S sequences moves each
// state through memory exactly twice. Per token the kernel stages its key-side vectors (q, k, the
// decay a, …: [K]) in shared memory (TokenVectors, double-buffered so that one barrier a token
// separates their writes from the previous token's reads) and combines, for its column c:
//   decay(a)          S ← Diag(a) S
//   dot(x)            this thread's part of (Sᵀx)_c = Σ_d S[d, c] x[d]
//   rank_one(k, u)    S ← S + k uᵀ  (u = u_c, the column's value)
//   column_sums       the parts of the warps added up (fixed order) for every column
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cuda/warp_reduce.cuh"

namespace linea::cuda::state {

inline constexpr int kWarps = 8;
inline constexpr int kColumns = kWarpSize;
inline constexpr int kThreads = kWarps * kColumns;
inline constexpr int kMaxKeyDim = 256;

// The column this thread holds, and the rows d = warp + i·kWarps (i < kRows) that are below K.
template <int kRows>
struct Columns {
  float s[kRows];
  int warp, column;  // column may lie past V (a tail tile): then it is never stored

  __device__ Columns(int tile) : warp(threadIdx.x / kColumns), column(tile * kColumns + threadIdx.x % kColumns) {}

  __device__ int row(int i) const { return warp + i * kWarps; }

  // S: the head's state [K, V], or null for zeros.
  __device__ void load(const float* S, int K, int V) {
#pragma unroll
    for (int i = 0; i < kRows; ++i) s[i] = S && row(i) < K && column < V ? S[int64_t{row(i)} * V + column] : 0.0f;
  }
  __device__ void store(float* S, int K, int V) const {
    if (column >= V) return;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      if (row(i) < K) S[int64_t{row(i)} * V + column] = s[i];
    }
  }
  __device__ void decay(const float* a, int K) {
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      if (row(i) < K) s[i] *= a[row(i)];
    }
  }
  __device__ float dot(const float* x, int K) const {
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      if (row(i) < K) sum += s[i] * x[row(i)];
    }
    return sum;
  }
  __device__ void rank_one(const float* k, float u, int K) {
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      if (row(i) < K) s[i] += k[row(i)] * u;
    }
  }
};

// This thread's part of x·y over the rows its warp holds (the same in every lane of a warp), so that
// column_sums also forms block-wide dot products of two staged vectors.
template <int kRows>
__device__ float rows_dot(const float* x, const float* y, int K) {
  const int warp = threadIdx.x / kColumns;
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const int d = warp + i * kWarps;
    if (d < K) sum += x[d] * y[d];
  }
  return sum;
}

// Adds up N per-thread parts over the block's warps, in the order of the warps: afterwards every
// thread holds the totals of its column. parts: shared [N][kWarps][kColumns]. One barrier; the next
// call may write `parts` only after another barrier (the next token's staging gives one).
template <int N>
__device__ void column_sums(float (&v)[N], float* parts) {
  const int warp = threadIdx.x / kColumns, lane = threadIdx.x % kColumns;
#pragma unroll
  for (int n = 0; n < N; ++n) parts[(n * kWarps + warp) * kColumns + lane] = v[n];
  __syncthreads();
#pragma unroll
  for (int n = 0; n < N; ++n) {
    float total = 0.0f;
    for (int w = 0; w < kWarps; ++w) total += parts[(n * kWarps + w) * kColumns + lane];
    v[n] = total;
  }
}

// kVectors key-side vectors of one token in shared memory, in two buffers by token parity.
template <int kVectors>
struct TokenVectors {
  float x[2][kVectors][kMaxKeyDim];
  // The buffer of the token with index `i` in its sequence.
  __device__ float (*of(int64_t i))[kMaxKeyDim] { return x[i & 1]; }
};

// Calls fn(std::integral_constant<int, kRows>{}) with the fewest rows per thread that hold K ≤ 256.
template <class Fn>
void dispatch_rows(int64_t key_dim, Fn&& fn) {
  if (key_dim <= 64) return fn(std::integral_constant<int, 64 / kWarps>{});
  if (key_dim <= 128) return fn(std::integral_constant<int, 128 / kWarps>{});
  if (key_dim <= kMaxKeyDim) return fn(std::integral_constant<int, kMaxKeyDim / kWarps>{});
  throw std::invalid_argument("recurrent state kernels: K = " + std::to_string(key_dim) + " is above " +
                              std::to_string(kMaxKeyDim));
}

// The grid of a recurrent kernel: (column tiles, heads, sequences).
inline dim3 grid(int64_t value_dim, int64_t heads, int64_t sequences) {
  return dim3(static_cast<unsigned>((value_dim + kColumns - 1) / kColumns), static_cast<unsigned>(heads),
              static_cast<unsigned>(sequences));
}

}  // namespace linea::cuda::state
