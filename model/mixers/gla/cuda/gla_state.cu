// The state passes of the CUDA gated-linear-attention family (model/mixers/gla/cuda/gla_kernels.cuh
// has the notation): one block per (sequence, head, 32 value columns) walks the sequence's chunks
// with its slice of the state, S[K][32] f32, in shared memory. Thread (r, e) = (threadIdx / 32,
// threadIdx % 32) owns column e and the rows r, r + 8, … .
//
//   forward   O_i = scale (q_i ⊙ exp(R_i)) S0 + scale Σ_j P_ij v_j       (rows i < L)
//             S ← Diag(exp(G_{L−1})) S + Σ_j (k_j ⊙ exp(G_{L−1} − G_j)) v_jᵀ
//   backward  (chunks in reverse, dS from dht) dS ← Diag(exp(G_{L−1})) dS + scale Σ_i (q_i ⊙ exp(R_i)) dO_iᵀ
//
// Shared memory (f32): S [K][32]; Qd = scale Q ⊙ exp(R) [64][K]; the forward also Kd = K ⊙
// exp(G_{L−1} − G) [64][K], P [64][64]; the value (or dO) tile [64][32]; exp(G_{L−1}) [K].
#include <algorithm>

#include "kernels/cuda/check.h"
#include "model/mixers/gla/cuda/gla_kernels.cuh"

namespace linea::cuda::gla {

namespace {

// Qd (and Kd when not null) of the chunk's rows, zero past L; decay_end[d] = exp(G_{L−1, d}).
template <class T>
__device__ void load_decayed_rows(const Call& c, const double* G, const Span& s, int h, float* Qd, float* Kd,
                                  float* decay_end) {
  const int K = c.key_dim;
  for (int p = threadIdx.x; p < kC * K; p += kThreads) {
    const int i = p / K, d = p % K;
    const bool inside = i < s.len;
    const int64_t t = s.first + i;
    Qd[p] = inside ? c.scale * query<T>(c, t, h, d) * decay_between(readout_decay(c, G, s, h, i, d), 0.0) : 0.0f;
    if (Kd) {
      Kd[p] = inside
                  ? key<T>(c, t, h, d) * decay_between(cumulated(c, G, s, h, s.len - 1, d), cumulated(c, G, s, h, i, d))
                  : 0.0f;
    }
  }
  for (int d = threadIdx.x; d < K; d += kThreads)
    decay_end[d] = decay_between(cumulated(c, G, s, h, s.len - 1, d), 0.0);
}

// S ← from (or zeros), and back: the block's slice, columns e0 + e < V.
__device__ void load_slice(const Call& c, float* S, const float* from, int64_t n, int h, int e0) {
  const int e = threadIdx.x % kColumns, e_global = e0 + e;
  for (int d = threadIdx.x / kColumns; d < c.key_dim; d += kRowGroups) {
    S[d * kColumns + e] = from && e_global < c.value_dim ? from[state_index(c, n, h, d, e_global)] : 0.0f;
  }
}
__device__ void store_slice(const Call& c, const float* S, float* to, int64_t n, int h, int e0) {
  const int e = threadIdx.x % kColumns, e_global = e0 + e;
  if (e_global >= c.value_dim) return;
  for (int d = threadIdx.x / kColumns; d < c.key_dim; d += kRowGroups) {
    to[state_index(c, n, h, d, e_global)] = S[d * kColumns + e];
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    state_forward_kernel(Call c, Workspace ws, const float* h0, float* ht, T* o) {
  extern __shared__ float smem[];
  const int K = c.key_dim;
  float* S = smem;
  float* Qd = S + K * kColumns;
  float* Kd = Qd + kC * K;
  float* P = Kd + kC * K;
  float* Vt = P + kC * kC;
  float* decay_end = Vt + kC * kColumns;
  const int64_t seq = blockIdx.x;
  const int h = blockIdx.y, e0 = blockIdx.z * kColumns;
  const int e = threadIdx.x % kColumns, r = threadIdx.x / kColumns;
  load_slice(c, S, h0, seq, h, e0);
  for (int64_t chunk = c.chunks.seq_chunk[seq]; chunk < c.chunks.seq_chunk[seq + 1]; ++chunk) {
    const Span s = chunk_span(c, chunk);
    __syncthreads();  // S is current; the previous chunk's tiles are no longer read
    if (ws.h) store_slice(c, S, ws.h, chunk, h, e0);
    load_decayed_rows<T>(c, ws.G, s, h, Qd, Kd, decay_end);
    load_column_tile<T>(c, c.v, s, h, e0, Vt);
    if (o) {
      const float* from = ws.P + (chunk * c.heads + h) * kC * kC;
      for (int p = threadIdx.x; p < kC * kC; p += kThreads) P[p] = from[p];
    }
    __syncthreads();
    if (o && e0 + e < c.value_dim) {
      for (int i = r; i < s.len; i += kRowGroups) {
        float inter = 0.0f, intra = 0.0f;  // Qd already holds the scale
        for (int d = 0; d < K; ++d) inter += Qd[i * K + d] * S[d * kColumns + e];
        for (int j = 0; j <= i; ++j) intra += P[i * kC + j] * Vt[j * kColumns + e];
        o[row_index(c, s.first + i, h) * c.value_dim + e0 + e] = from_float<T>(inter + c.scale * intra);
      }
    }
    __syncthreads();  // every read of S0 is done
    for (int d = r; d < K; d += kRowGroups) {
      float sum = decay_end[d] * S[d * kColumns + e];
      for (int j = 0; j < s.len; ++j) sum += Kd[j * K + d] * Vt[j * kColumns + e];
      S[d * kColumns + e] = sum;
    }
  }
  if (ht) store_slice(c, S, ht, seq, h, e0);  // each thread stores the entries it wrote
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    state_backward_kernel(Call c, Workspace ws, const T* d_o, const float* dht, float* dh0) {
  extern __shared__ float smem[];
  const int K = c.key_dim;
  float* dS = smem;
  float* Qd = dS + K * kColumns;
  float* dOt = Qd + kC * K;
  float* decay_end = dOt + kC * kColumns;
  const int64_t seq = blockIdx.x;
  const int h = blockIdx.y, e0 = blockIdx.z * kColumns;
  const int e = threadIdx.x % kColumns, r = threadIdx.x / kColumns;
  load_slice(c, dS, dht, seq, h, e0);
  for (int64_t chunk = c.chunks.seq_chunk[seq + 1] - 1; chunk >= c.chunks.seq_chunk[seq]; --chunk) {
    const Span s = chunk_span(c, chunk);
    __syncthreads();
    store_slice(c, dS, ws.dh, chunk, h, e0);
    load_decayed_rows<T>(c, ws.G, s, h, Qd, nullptr, decay_end);
    load_column_tile<T>(c, d_o, s, h, e0, dOt);
    __syncthreads();
    for (int d = r; d < K; d += kRowGroups) {
      float sum = decay_end[d] * dS[d * kColumns + e];
      for (int i = 0; i < s.len; ++i) sum += Qd[i * K + d] * dOt[i * kColumns + e];
      dS[d * kColumns + e] = sum;
    }
  }
  if (dh0) store_slice(c, dS, dh0, seq, h, e0);
}

dim3 state_grid(const Call& c) {
  return dim3(static_cast<unsigned>(c.chunks.seqs), static_cast<unsigned>(c.heads),
              static_cast<unsigned>((c.value_dim + kColumns - 1) / kColumns));
}

template <class T>
void launch_forward(const Call& c, const Workspace& ws, const float* h0, float* ht, void* o) {
  const int K = c.key_dim;
  const size_t bytes = sizeof(float) * (K * kColumns + 2 * kC * K + kC * kC + kC * kColumns + K);
  delta::allow_shared_memory(reinterpret_cast<const void*>(&state_forward_kernel<T>), bytes);
  state_forward_kernel<T><<<state_grid(c), kThreads, bytes>>>(c, ws, h0, ht, static_cast<T*>(o));
  check_launch("gla state_forward");
}

template <class T>
void launch_backward(const Call& c, const Workspace& ws, const void* d_o, const float* dht, float* dh0) {
  const int K = c.key_dim;
  const size_t bytes = sizeof(float) * (K * kColumns + kC * K + kC * kColumns + K);
  delta::allow_shared_memory(reinterpret_cast<const void*>(&state_backward_kernel<T>), bytes);
  state_backward_kernel<T><<<state_grid(c), kThreads, bytes>>>(c, ws, static_cast<const T*>(d_o), dht, dh0);
  check_launch("gla state_backward");
}

}  // namespace

void state_forward(const Call& c, const Workspace& ws, const float* h0, float* ht, void* o) {
  if (c.chunks.seqs == 0) return;
  if (c.bf16) return launch_forward<__nv_bfloat16>(c, ws, h0, ht, o);
  launch_forward<float>(c, ws, h0, ht, o);
}

void state_backward(const Call& c, const Workspace& ws, const void* d_o, const float* dht, float* dh0) {
  if (c.chunks.seqs == 0) return;
  if (c.bf16) return launch_backward<__nv_bfloat16>(c, ws, d_o, dht, dh0);
  launch_backward<float>(c, ws, d_o, dht, dh0);
}

}  // namespace linea::cuda::gla
