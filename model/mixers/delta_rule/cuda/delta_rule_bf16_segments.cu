// Segment composition for the bf16 pipeline's state passes (model/mixers/delta_rule/cuda/delta_rule_bf16.cuh):
// a chunk's state update is affine, S ← M_c S + N_c (M_c = γ_L I − (K ⊙ exp(G_L − G))ᵀ W, N_c its
// U part), so a run of chunks (a segment) is too: S_end = A_s S_start + B_s. The state passes run
// on the segments as if each were a sequence of its own (B_s from S = 0; A_s as the pass over
// K columns of the identity with U = 0), and these kernels chain the segments of each sequence:
//   forward:   S_start(first) = h0 (or 0),  S_start(s + 1) = A_s S_start(s) + B_s,  ht = the last end
//   backward:  dS_end(last) = dht (or 0),   dS_end(s − 1) = A_sᵀ dS_end(s) + C_s,    dh0 = the first
//              start's (C_s: the segment's gradient at its start from dS_end = 0)
// One block per (sequence, head, 16 value columns), 256 threads, f32 FMAs in a fixed order (the
// chain is short: ≤ a sequence's chunks / 64 steps of a [Kd, Kd] × [Kd, 16] product); the state
// tile is in shared memory, A_s read from global memory (L2) 8 entries of a row at a time (two
// 16-byte loads forward), so that a step waits for K / 8 rounds of loads rather than K.
#include "kernels/cuda/check.h"
#include "model/mixers/delta_rule/cuda/delta_rule_bf16.cuh"

namespace linea::cuda::delta::bf16path {

namespace {

// The value columns of a chain block: narrower than the state passes' 64, so that a sequence's
// chain runs on four times as many blocks.
constexpr int kChainColumns = 16;

// Thread t owns row t / kRowThreads of the [Kd, 16] tile, columns kCols (t % kRowThreads).. .
template <int Kd>
struct ChainLayout {
  static constexpr int kRowThreads = kThreads / Kd, kCols = kChainColumns / kRowThreads;
  __device__ static int row() { return static_cast<int>(threadIdx.x) / kRowThreads; }
  __device__ static int col0() { return kCols * (static_cast<int>(threadIdx.x) % kRowThreads); }
};

struct ChainBlock {
  int64_t seq;
  int head, e0;
  __device__ ChainBlock(int heads, int tiles) {
    const int64_t x = blockIdx.x;
    e0 = static_cast<int>(x % tiles) * kChainColumns;
    head = static_cast<int>(x / tiles % heads);
    seq = x / tiles / heads;
  }
};

// Over the segments of the block's sequence, in order: next = A cur + add (forward), or in
// reverse: next = Aᵀ cur + add (backward); each segment's incoming value goes to `visited`.
template <int Kd, bool kReverse>
__global__ void __launch_bounds__(kThreads) chain_kernel(Chain c) {
  using CL = ChainLayout<Kd>;
  extern __shared__ __align__(16) float chain_shared[];
  float(*cur)[kChainColumns] = reinterpret_cast<float(*)[kChainColumns]>(chain_shared);  // [Kd][16]
  const ChainBlock blk(c.heads, (c.value_dim + kChainColumns - 1) / kChainColumns);
  const int K = c.key_dim, V = c.value_dim, d = CL::row(), col0 = CL::col0();
  const int64_t kv = static_cast<int64_t>(K) * V, kk = static_cast<int64_t>(K) * K;
  const auto at = [&](int64_t state, int row, int e) {
    return state * kv + static_cast<int64_t>(row) * V + blk.e0 + e;
  };
  const bool inside_row = d < K;
  const int64_t own = blk.seq * c.heads + blk.head;  // the sequence's state index
#pragma unroll
  for (int j = 0; j < CL::kCols; ++j) {
    const int e = col0 + j;
    cur[d][e] = c.first && inside_row && blk.e0 + e < V ? c.first[at(own, d, e)] : 0.0f;
  }
  const int64_t begin = c.seq_segment[blk.seq], end = c.seq_segment[blk.seq + 1];
  for (int64_t n = 0; n < end - begin; ++n) {
    const int64_t seg = kReverse ? end - 1 - n : begin + n;
    const int64_t state = seg * c.heads + blk.head;
    __syncthreads();
    float next[CL::kCols];
#pragma unroll
    for (int j = 0; j < CL::kCols; ++j) {
      const int e = col0 + j;
      const bool inside = inside_row && blk.e0 + e < V;
      if (inside) c.visited[at(state, d, e)] = cur[d][e];
      next[j] = inside ? c.add[at(state, d, e)] : 0.0f;
    }
    if (inside_row) {
      const float* A = c.A + state * kk;
      for (int m0 = 0; m0 < K; m0 += 8) {  // K is a multiple of 8
        float a[8];
        if constexpr (kReverse) {  // column d: the lanes' neighbouring d are neighbouring addresses
#pragma unroll
          for (int u = 0; u < 8; ++u) a[u] = A[static_cast<int64_t>(m0 + u) * K + d];
        } else {  // row d: 32 bytes (the stack is 256-byte aligned, K a multiple of 8)
          const float4* row = reinterpret_cast<const float4*>(A + static_cast<int64_t>(d) * K + m0);
          const float4 x = row[0], y = row[1];
          a[0] = x.x, a[1] = x.y, a[2] = x.z, a[3] = x.w, a[4] = y.x, a[5] = y.y, a[6] = y.z, a[7] = y.w;
        }
#pragma unroll
        for (int u = 0; u < 8; ++u) {
#pragma unroll
          for (int j = 0; j < CL::kCols; ++j) next[j] += a[u] * cur[m0 + u][col0 + j];
        }
      }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < CL::kCols; ++j) cur[d][col0 + j] = next[j];
  }
  if (c.last && inside_row) {
#pragma unroll
    for (int j = 0; j < CL::kCols; ++j) {
      const int e = col0 + j;
      if (blk.e0 + e < V) c.last[at(own, d, e)] = cur[d][e];
    }
  }
}

// Every state of a stack [count, K, K] ← the identity.
__global__ void identity_kernel(float* states, int64_t count, int K) {
  const int64_t kk = static_cast<int64_t>(K) * K;
  for (int64_t p = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; p < count * kk;
       p += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = p % kk;
    states[p] = r / K == r % K ? 1.0f : 0.0f;
  }
}

}  // namespace

void chain(const Chain& c, bool reverse) {
  if (c.seqs == 0) return;
  const dim3 grid(static_cast<unsigned>(c.seqs * c.heads * ceil_div(c.value_dim, kChainColumns)));
  dispatch_key_tile(c.key_dim, [&](auto tile) {
    constexpr int Kd = decltype(tile)::value;
    const auto kernel = reverse ? chain_kernel<Kd, true> : chain_kernel<Kd, false>;
    constexpr size_t bytes = sizeof(float) * Kd * kChainColumns;
    allow_shared_memory(reinterpret_cast<const void*>(kernel), bytes);
    kernel<<<grid, kThreads, bytes>>>(c);
    check_launch("delta_rule bf16 chain_kernel");
  });
}

void fill_identity(float* states, int64_t count, int key_dim) {
  if (count == 0) return;
  identity_kernel<<<grid_stride_blocks(count * key_dim * key_dim), kThreadsPerBlock>>>(states, count, key_dim);
  check_launch("delta_rule bf16 identity_kernel");
}

}  // namespace linea::cuda::delta::bf16path
