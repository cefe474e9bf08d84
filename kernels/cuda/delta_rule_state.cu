// The two sequential passes over the chunks of a sequence, one block per (sequence, head, tile of
// kBlockV value columns), the state tile kept in shared memory in f32 (the columns of S never mix,
// so V splits across blocks). Each chunk's rows of W and Kend, its tile of U (and Qg, dŨ and dO
// in the backward) are staged in shared memory first, by asynchronous copies (cp.async) that are
// all in flight at once: the pass is a chain of chunks, so what it waits for per chunk is latency.
//
// state_forward, chunks in order, S = h0 (or 0) at the sequence start:
//   S_chunk = S                                   (stored: the state entering the chunk)
//   Ũ = U − W S                                   (stored)
//   S ← Diag(γ_L) S + Kendᵀ Ũ,  Kend = K ⊙ exp(G_L − G);   ht = S after the last chunk
// state_backward, chunks in reverse, dS = dht (or 0) at the sequence end, dŨ holding scale·Pᵀ dO:
//   dS_chunk = dS                                 (stored: ∂L/∂ state at the chunk's end)
//   dŨ += Kend dS                                 (stored)
//   dS ← Diag(γ_L) dS + Qgᵀ dO − Wᵀ dŨ,  Qg = scale · Q ⊙ γ;   dh0 = dS at the sequence start
#include <cuda_pipeline.h>

#include <algorithm>

#include "kernels/cuda/check.h"
#include "kernels/cuda/delta_rule_chunk.cuh"
#include "kernels/cuda/launch.h"

namespace linea::cuda::delta {

namespace {

constexpr int kBlockV = 16;
constexpr int kThreadRows = kThreads / kBlockV;  // threads per value column (16)
static_assert(kChunk * kBlockV % kThreads == 0);

// The pitch of the [C][pitch] row tiles: the two rows one warp reads at a time land in different
// banks, and with K a multiple of 4 every row starts on 16 bytes (16-byte copies).
__host__ __device__ constexpr int row_pitch(int key_dim) { return key_dim % 4 == 0 ? key_dim + 4 : key_dim + 1; }

// Shared memory: the state tile [K][kBlockV], a chunk's tile of U, Ũ or dŨ [C][kBlockV], the
// chunk's rows of W and Kend [C][pitch] each; the backward adds the rows of Qg [C][pitch] and a
// tile of dO [C][kBlockV]. Every part starts on 16 bytes when K is a multiple of 4.
size_t state_shared_bytes(int key_dim, bool backward) {
  const size_t rows = kChunk * static_cast<size_t>(row_pitch(key_dim));
  const size_t forward = static_cast<size_t>(key_dim) * kBlockV + kChunk * kBlockV + 2 * rows;
  return sizeof(float) * (forward + (backward ? rows + kChunk * kBlockV : 0));
}

struct StateTile {
  int pitch;
  float *S, *Ut, *W, *Kend, *Qg, *dO;
  __device__ explicit StateTile(float* shared, int K)
      : pitch(row_pitch(K)),
        S(shared),
        Ut(shared + K * kBlockV),
        W(Ut + kChunk * kBlockV),
        Kend(W + kChunk * pitch),
        Qg(Kend + kChunk * pitch),
        dO(Qg + kChunk * pitch) {}
};

// Asynchronous copies into shared memory: the stage_* helpers only start them; copies_done()
// waits for all of the thread's, and a __syncthreads() after it publishes them to the block.

// Rows i < L of a [N, H, K] workspace buffer into a [C][pitch] tile (coalesced over the channels),
// 16 bytes a copy when K is a multiple of 4 (row starts and the workspace are then 16-byte aligned).
template <class Ref>
__device__ void stage_rows(const Ref& c, const float* from, float* to, int K, int pitch) {
  if (K % 4 == 0) {
    const int quads = K / 4;
    for (int p = threadIdx.x; p < c.len * quads; p += blockDim.x) {
      const int i = p / quads, d = 4 * (p % quads);
      __pipeline_memcpy_async(to + i * pitch + d, from + c.key(i, d), 16);
    }
  } else {
    for (int p = threadIdx.x; p < c.len * K; p += blockDim.x) {
      __pipeline_memcpy_async(to + (p / K) * pitch + p % K, from + c.key(p / K, p % K), 4);
    }
  }
}

// Rows i < L, columns e0 + e (e < BV) of a [N, H, V] workspace buffer into a [C][kBlockV] tile; the
// other entries are left as they are.
template <class Ref>
__device__ void stage_value_tile(const Ref& c, const float* from, float* to, int e0, int BV) {
  for (int p = threadIdx.x; p < c.len * kBlockV; p += blockDim.x) {
    const int i = p / kBlockV, e = p % kBlockV;
    if (e < BV) __pipeline_memcpy_async(to + p, from + c.value(i, e0 + e), 4);
  }
}

__device__ void copies_done() {
  __pipeline_commit();
  __pipeline_wait_prior(0);
}

// Every thread owns the state entries (d, e) with e = threadIdx.x % kBlockV and d ≡ threadIdx.x /
// kBlockV (mod kThreadRows), up to kMaxKeyDim / kThreadRows of them, kept in registers by the two
// helpers below; both loop with several independent sums per thread.

// out(i, e, Σ_d X[i][d] S[d][e]) for i < L and every e of the tile, X a [C][pitch] tile.
template <class Out>
__device__ void rows_times_state(const float* X, int pitch, const float* S, int L, int K, Out out) {
  constexpr int kRows = kChunk / kThreadRows;
  const int e = threadIdx.x % kBlockV, i0 = threadIdx.x / kBlockV;
  float acc[kRows] = {};
#pragma unroll 4
  for (int d = 0; d < K; ++d) {
    const float s = S[d * kBlockV + e];
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] += X[(i0 + kThreadRows * r) * pitch + d] * s;
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (i0 + kThreadRows * r < L) out(i0 + kThreadRows * r, e, acc[r]);
  }
}

// S[d][e] ← decay(d) · S[d][e] + Σ_{i<L} Σ_t Y_t[i][d] Z_t[i][e] for the kTerms pairs of a [C][pitch]
// tile Y_t and a [C][kBlockV] tile Z_t, for K ≤ kMaxK. Reads and writes only the thread's own
// entries of S.
template <int kMaxK, int kTerms, class Decay>
__device__ void update_state_upto(float* S, int L, int K, Decay decay, const float* const (&Y)[kTerms], int pitch,
                                  const float* const (&Z)[kTerms]) {
  constexpr int kRows = kMaxK / kThreadRows;
  const int e = threadIdx.x % kBlockV, d0 = threadIdx.x / kBlockV;
  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int d = d0 + kThreadRows * r;
    acc[r] = d < K ? decay(d) * S[d * kBlockV + e] : 0.0f;
  }
  for (int i = 0; i < L; ++i) {
#pragma unroll
    for (int t = 0; t < kTerms; ++t) {
      const float z = Z[t][i * kBlockV + e];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int d = d0 + kThreadRows * r;
        if (d < K) acc[r] += Y[t][i * pitch + d] * z;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int d = d0 + kThreadRows * r;
    if (d < K) S[d * kBlockV + e] = acc[r];
  }
}

// update_state_upto for the smallest bound that holds K (no idle, predicated-off rows in the
// inner loop when K ≤ kMaxKeyDim / 2).
template <int kTerms, class Decay>
__device__ void update_state(float* S, int L, int K, Decay decay, const float* const (&Y)[kTerms], int pitch,
                             const float* const (&Z)[kTerms]) {
  if (K <= kMaxKeyDim / 2) {
    update_state_upto<kMaxKeyDim / 2>(S, L, K, decay, Y, pitch, Z);
  } else {
    update_state_upto<kMaxKeyDim>(S, L, K, decay, Y, pitch, Z);
  }
}

// The state tile from `from` ([S, H, K, V] at `state`, columns e0..) or zeros; columns past V are 0.
__device__ void load_state(float* S, const float* from, int64_t state, int K, int V, int e0, int BV) {
  for (int p = threadIdx.x; p < K * kBlockV; p += blockDim.x) {
    const int d = p / kBlockV, e = p % kBlockV;
    S[p] = from && e < BV ? from[state + d * V + e0 + e] : 0.0f;
  }
}

__device__ void store_state(float* to, const float* S, int64_t state, int K, int V, int e0, int BV) {
  for (int p = threadIdx.x; p < K * BV; p += blockDim.x) {
    const int d = p / BV, e = p % BV;
    to[state + d * V + e0 + e] = S[d * kBlockV + e];
  }
}

template <class E, ops::DecayKind kDecay, ops::GateKind kGate>
__global__ void __launch_bounds__(kThreads)
    state_forward_kernel(Operands<E> x, Chunks chunks, Workspace ws, const float* h0, float* ht) {
  extern __shared__ __align__(16) float shared[];
  const int64_t seq = blockIdx.x;
  const int head = blockIdx.y, e0 = blockIdx.z * kBlockV;
  const int K = x.key_dim, V = x.value_dim, BV = min(kBlockV, V - e0);
  const StateTile t(shared, K);
  const int64_t state = (seq * x.heads + head) * K * V;
  load_state(t.S, h0, state, K, V, e0, BV);
  __syncthreads();
  const int64_t begin = chunks.seq_chunk[seq], end = chunks.seq_chunk[seq + 1];
  if (begin < end) {
    // c: the chunk at hand; the next one's table entries are read before the state update.
    ChunkRef<E, kDecay, kGate> c(x, chunks, ws.G, begin, head);
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      const int L = c.len;
      stage_rows(c, ws.W, t.W, K, t.pitch);
      stage_rows(c, ws.Kend, t.Kend, K, t.pitch);
      stage_value_tile(c, ws.U, t.Ut, e0, BV);
      store_state(ws.S, t.S, (chunk * x.heads + head) * K * V, K, V, e0, BV);
      copies_done();
      __syncthreads();
      // Ut holds U; each entry is read and replaced by Ũ in the same thread.
      rows_times_state(t.W, t.pitch, t.S, L, K, [&](int i, int e, float w_state) {
        const float u = e < BV ? t.Ut[i * kBlockV + e] - w_state : 0.0f;
        t.Ut[i * kBlockV + e] = u;
        if (e < BV) ws.Ut[c.value(i, e0 + e)] = u;
      });
      __syncthreads();
      const float* const Y[1] = {t.Kend};
      const float* const Z[1] = {t.Ut};
      const ChunkRef<E, kDecay, kGate> next(x, chunks, ws.G, min(chunk + 1, end - 1), head);
      update_state<1>(
          t.S, L, K, [&](int d) { return c.gamma(L - 1, d); }, Y, t.pitch, Z);
      __syncthreads();
      c = next;
    }
  }
  if (ht) store_state(ht, t.S, state, K, V, e0, BV);
}

template <class E, ops::DecayKind kDecay, ops::GateKind kGate>
__global__ void __launch_bounds__(kThreads)
    state_backward_kernel(Operands<E> x, Chunks chunks, Workspace ws, const E* d_o, const float* dht, GradWorkspace gws,
                          float* dh0) {
  extern __shared__ __align__(16) float shared[];
  const int64_t seq = blockIdx.x;
  const int head = blockIdx.y, e0 = blockIdx.z * kBlockV;
  const int K = x.key_dim, V = x.value_dim, BV = min(kBlockV, V - e0);
  const StateTile t(shared, K);  // S holds dS
  const int64_t state = (seq * x.heads + head) * K * V;
  load_state(t.S, dht, state, K, V, e0, BV);
  __syncthreads();
  const int64_t begin = chunks.seq_chunk[seq], end = chunks.seq_chunk[seq + 1];
  if (begin < end) {
    // c: the chunk at hand; the next one (backwards) has its table entries read before the update.
    ChunkRef<E, kDecay, kGate> c(x, chunks, ws.G, end - 1, head);
    for (int64_t chunk = end - 1; chunk >= begin; --chunk) {
      const int L = c.len;
      stage_rows(c, ws.W, t.W, K, t.pitch);
      stage_rows(c, ws.Kend, t.Kend, K, t.pitch);
      stage_rows(c, ws.Qg, t.Qg, K, t.pitch);
      stage_value_tile(c, gws.dUt, t.Ut, e0, BV);
      // The dO tile (converted to f32): every load of the thread first, then the stores.
      constexpr int kOutputsPerThread = kChunk * kBlockV / kThreads;
      float d_out[kOutputsPerThread];
#pragma unroll
      for (int r = 0; r < kOutputsPerThread; ++r) {
        const int p = threadIdx.x + r * kThreads, i = p / kBlockV, e = p % kBlockV;
        d_out[r] = i < L && e < BV ? to_float(d_o[c.value(i, e0 + e)]) : 0.0f;
      }
#pragma unroll
      for (int r = 0; r < kOutputsPerThread; ++r) t.dO[threadIdx.x + r * kThreads] = d_out[r];
      store_state(gws.dS, t.S, (chunk * x.heads + head) * K * V, K, V, e0, BV);
      copies_done();
      __syncthreads();
      // Ut holds dŨ (the part through O); each entry is read and replaced by −dŨ (complete, for the
      // − Wᵀ dŨ term) in the same thread.
      rows_times_state(t.Kend, t.pitch, t.S, L, K, [&](int i, int e, float kds) {
        const float du = e < BV ? t.Ut[i * kBlockV + e] + kds : 0.0f;
        t.Ut[i * kBlockV + e] = -du;
        if (e < BV) gws.dUt[c.value(i, e0 + e)] = du;
      });
      __syncthreads();
      const float* const Y[2] = {t.Qg, t.W};
      const float* const Z[2] = {t.dO, t.Ut};
      const ChunkRef<E, kDecay, kGate> next(x, chunks, ws.G, max(chunk - 1, begin), head);
      update_state<2>(
          t.S, L, K, [&](int d) { return c.gamma(L - 1, d); }, Y, t.pitch, Z);
      __syncthreads();
      c = next;
    }
  }
  if (dh0) store_state(dh0, t.S, state, K, V, e0, BV);
}

dim3 state_grid(const Call& call) {
  return dim3(static_cast<unsigned>(call.chunks.seqs), static_cast<unsigned>(call.heads),
              static_cast<unsigned>(ceil_div(call.value_dim, kBlockV)));
}

}  // namespace

void state_forward(const Call& call, const Workspace& ws, const float* h0, float* ht) {
  if (call.chunks.seqs == 0) return;
  const size_t bytes = state_shared_bytes(call.key_dim, false);
  dispatch_kinds(call, [&](auto element, auto decay, auto gate) {
    using E = decltype(element);
    const auto kernel = state_forward_kernel<E, decltype(decay)::value, decltype(gate)::value>;
    allow_shared_memory(reinterpret_cast<const void*>(kernel), bytes);
    kernel<<<state_grid(call), kThreads, bytes>>>(operands<E>(call), call.chunks, ws, h0, ht);
    check_launch("delta_rule state_forward_kernel");
  });
}

void state_backward(const Call& call, const Workspace& ws, const void* d_o, const float* dht, const GradWorkspace& gws,
                    float* dh0) {
  if (call.chunks.seqs == 0) return;
  const size_t bytes = state_shared_bytes(call.key_dim, true);
  dispatch_kinds(call, [&](auto element, auto decay, auto gate) {
    using E = decltype(element);
    const auto kernel = state_backward_kernel<E, decltype(decay)::value, decltype(gate)::value>;
    allow_shared_memory(reinterpret_cast<const void*>(kernel), bytes);
    kernel<<<state_grid(call), kThreads, bytes>>>(operands<E>(call), call.chunks, ws, static_cast<const E*>(d_o), dht,
                                                  gws, dh0);
    check_launch("delta_rule state_backward_kernel");
  });
}

}  // namespace linea::cuda::delta
