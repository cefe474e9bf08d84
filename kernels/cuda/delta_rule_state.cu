// The two sequential passes over the chunks of a sequence, one block per (sequence, head, tile of
// kBlockV value columns), the state tile kept in shared memory in f32 (the columns of S never mix,
// so V splits across blocks). Each chunk's W and Kend rows are staged in shared memory first.
//
// state_forward, chunks in order, S = h0 (or 0) at the sequence start:
//   S_chunk = S                                   (stored: the state entering the chunk)
//   Ũ = U − W S                                   (stored)
//   S ← Diag(γ_L) S + Kendᵀ Ũ,  Kend = K ⊙ exp(G_L − G);   ht = S after the last chunk
// state_backward, chunks in reverse, dS = dht (or 0) at the sequence end, dŨ holding scale·Pᵀ dO:
//   dS_chunk = dS                                 (stored: ∂L/∂ state at the chunk's end)
//   dŨ += Kend dS                                 (stored)
//   dS ← Diag(γ_L) dS + Qgᵀ dO − Wᵀ dŨ,  Qg = scale · Q ⊙ γ;   dh0 = dS at the sequence start
#include <algorithm>

#include "kernels/cuda/check.h"
#include "kernels/cuda/delta_rule_chunk.cuh"
#include "kernels/cuda/launch.h"

namespace linea::cuda::delta {

namespace {

constexpr int kBlockV = 16;

// Shared memory: the state tile [K][kBlockV], a chunk's tile of Ũ or dŨ [C][kBlockV], and the
// chunk's rows of W and Kend [C][K] each.
size_t state_shared_bytes(int key_dim) {
  return sizeof(float) * (static_cast<size_t>(key_dim) * kBlockV + kChunk * kBlockV + 2 * kChunk * key_dim);
}

struct StateTile {
  float *S, *Ut, *W, *Kend;
  __device__ explicit StateTile(float* shared, int K)
      : S(shared), Ut(shared + K * kBlockV), W(Ut + kChunk * kBlockV), Kend(W + kChunk * K) {}
};

// W and Kend rows of the chunk into shared memory (coalesced over the channels).
template <class Ref>
__device__ void stage_rows(const Ref& c, const Workspace& ws, const StateTile& t, int K) {
  for (int p = threadIdx.x; p < c.len * K; p += blockDim.x) {
    const int i = p / K, d = p % K;
    t.W[i * K + d] = ws.W[c.key(i, d)];
    t.Kend[i * K + d] = ws.Kend[c.key(i, d)];
  }
}

// exp(G_L) of channel d (the decay of the whole chunk).
template <class Ref>
__device__ float chunk_decay(const Ref& c, int d) {
  return c.gamma(c.len - 1, d);
}

template <class E, ops::DecayKind kDecay, ops::GateKind kGate>
__global__ void __launch_bounds__(kThreads)
    state_forward_kernel(Operands<E> x, Chunks chunks, Workspace ws, const float* h0, float* ht) {
  extern __shared__ float shared[];
  const int64_t seq = blockIdx.x;
  const int head = blockIdx.y, e0 = blockIdx.z * kBlockV;
  const int K = x.key_dim, V = x.value_dim, BV = min(kBlockV, V - e0);
  const StateTile t(shared, K);
  const int64_t state = (seq * x.heads + head) * K * V;
  for (int p = threadIdx.x; p < K * BV; p += blockDim.x) {
    const int d = p / BV, e = p % BV;
    t.S[d * kBlockV + e] = h0 ? h0[state + d * V + e0 + e] : 0.0f;
  }
  __syncthreads();
  for (int64_t chunk = chunks.seq_chunk[seq]; chunk < chunks.seq_chunk[seq + 1]; ++chunk) {
    const ChunkRef<E, kDecay, kGate> c(x, chunks, ws.G, chunk, head);
    const int L = c.len;
    float* S_chunk = ws.S + (chunk * x.heads + head) * K * V;
    for (int p = threadIdx.x; p < K * BV; p += blockDim.x) {
      const int d = p / BV, e = p % BV;
      S_chunk[d * V + e0 + e] = t.S[d * kBlockV + e];
    }
    stage_rows(c, ws, t, K);
    __syncthreads();
    for (int p = threadIdx.x; p < L * BV; p += blockDim.x) {
      const int i = p / BV, e = p % BV;
      float u = ws.U[c.value(i, e0 + e)];
      for (int d = 0; d < K; ++d) u -= t.W[i * K + d] * t.S[d * kBlockV + e];
      t.Ut[i * kBlockV + e] = u;
      ws.Ut[c.value(i, e0 + e)] = u;
    }
    __syncthreads();
    for (int p = threadIdx.x; p < K * BV; p += blockDim.x) {
      const int d = p / BV, e = p % BV;
      float s = chunk_decay(c, d) * t.S[d * kBlockV + e];
      for (int i = 0; i < L; ++i) s += t.Kend[i * K + d] * t.Ut[i * kBlockV + e];
      t.S[d * kBlockV + e] = s;
    }
    __syncthreads();
  }
  if (ht) {
    for (int p = threadIdx.x; p < K * BV; p += blockDim.x) {
      const int d = p / BV, e = p % BV;
      ht[state + d * V + e0 + e] = t.S[d * kBlockV + e];
    }
  }
}

template <class E, ops::DecayKind kDecay, ops::GateKind kGate>
__global__ void __launch_bounds__(kThreads)
    state_backward_kernel(Operands<E> x, Chunks chunks, Workspace ws, const E* d_o, const float* dht, GradWorkspace gws,
                          float* dh0) {
  extern __shared__ float shared[];
  const int64_t seq = blockIdx.x;
  const int head = blockIdx.y, e0 = blockIdx.z * kBlockV;
  const int K = x.key_dim, V = x.value_dim, BV = min(kBlockV, V - e0);
  const StateTile t(shared, K);  // S holds dS, Ut holds dŨ
  const int64_t state = (seq * x.heads + head) * K * V;
  for (int p = threadIdx.x; p < K * BV; p += blockDim.x) {
    const int d = p / BV, e = p % BV;
    t.S[d * kBlockV + e] = dht ? dht[state + d * V + e0 + e] : 0.0f;
  }
  __syncthreads();
  for (int64_t chunk = chunks.seq_chunk[seq + 1] - 1; chunk >= chunks.seq_chunk[seq]; --chunk) {
    const ChunkRef<E, kDecay, kGate> c(x, chunks, ws.G, chunk, head);
    const int L = c.len;
    float* dS_chunk = gws.dS + (chunk * x.heads + head) * K * V;
    for (int p = threadIdx.x; p < K * BV; p += blockDim.x) {
      const int d = p / BV, e = p % BV;
      dS_chunk[d * V + e0 + e] = t.S[d * kBlockV + e];
    }
    stage_rows(c, ws, t, K);
    __syncthreads();
    for (int p = threadIdx.x; p < L * BV; p += blockDim.x) {
      const int i = p / BV, e = p % BV;
      float du = gws.dUt[c.value(i, e0 + e)];
      for (int d = 0; d < K; ++d) du += t.Kend[i * K + d] * t.S[d * kBlockV + e];
      t.Ut[i * kBlockV + e] = du;
      gws.dUt[c.value(i, e0 + e)] = du;
    }
    __syncthreads();
    for (int p = threadIdx.x; p < K * BV; p += blockDim.x) {
      const int d = p / BV, e = p % BV;
      float s = chunk_decay(c, d) * t.S[d * kBlockV + e];
      for (int i = 0; i < L; ++i) {
        s += ws.Qg[c.key(i, d)] * to_float(d_o[c.value(i, e0 + e)]) - t.W[i * K + d] * t.Ut[i * kBlockV + e];
      }
      t.S[d * kBlockV + e] = s;
    }
    __syncthreads();
  }
  if (dh0) {
    for (int p = threadIdx.x; p < K * BV; p += blockDim.x) {
      const int d = p / BV, e = p % BV;
      dh0[state + d * V + e0 + e] = t.S[d * kBlockV + e];
    }
  }
}

dim3 state_grid(const Call& call) {
  return dim3(static_cast<unsigned>(call.chunks.seqs), static_cast<unsigned>(call.heads),
              static_cast<unsigned>(ceil_div(call.value_dim, kBlockV)));
}

}  // namespace

void state_forward(const Call& call, const Workspace& ws, const float* h0, float* ht) {
  if (call.chunks.seqs == 0) return;
  const size_t bytes = state_shared_bytes(call.key_dim);
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
  const size_t bytes = state_shared_bytes(call.key_dim);
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
