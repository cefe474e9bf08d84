// intra_chunk: everything about one chunk of one head that does not depend on the state entering
// it, for all chunks of all heads at once (one block each). With L ≤ 64 the chunk's length, g the
// log decay, b the erase gate and w the write gate (both β for GateKind::beta):
//   G_i   = Σ_{s≤i} g_s                                     (per channel, or one per row)
//   A_ij  = Σ_d b_id k_id k_jd exp(G_id − G_jd)   (j < i)    P_ij = Σ_d q_id k_jd exp(G_id − G_jd)   (j ≤ i)
//   T     = (I + A)^{-1}, by forward substitution: T_ij = −Σ_{j≤m<i} A_im T_mj for j < i, T_ii = 1
//   U     = T (w ⊙ V),   W = T (b ⊙ K ⊙ γ),   Kend = K ⊙ exp(G_L − G),   Qg = scale · Q ⊙ γ
// A and T stay in shared memory; G, P, T, U, W, Kend and Qg go to the workspace.
#include "kernels/cuda/check.h"
#include "kernels/cuda/delta_rule_chunk.cuh"

namespace linea::cuda::delta {

namespace {

template <class E, ops::DecayKind kDecay, ops::GateKind kGate>
__global__ void __launch_bounds__(kThreads) intra_chunk_kernel(Operands<E> x, Chunks chunks, Workspace ws) {
  const int64_t chunk = blockIdx.x;
  const int head = blockIdx.y;
  const int K = x.key_dim, V = x.value_dim;
  __shared__ float A[kChunk][kChunk + 1];
  __shared__ float Tm[kChunk][kChunk + 1];
  const ChunkRef<E, kDecay, kGate> c(x, chunks, ws.G, chunk, head);
  const int L = c.len;

  // G: a running sum down the chunk, one thread per channel (or one thread for a scalar decay).
  if constexpr (kDecay == ops::DecayKind::channel) {
    for (int d = threadIdx.x; d < K; d += blockDim.x) {
      float sum = 0.0f;
      for (int i = 0; i < L; ++i) {
        sum += x.g[c.key(i, d)];
        ws.G[c.key(i, d)] = sum;
      }
    }
  } else if constexpr (kDecay == ops::DecayKind::scalar) {
    if (threadIdx.x == 0) {
      float sum = 0.0f;
      for (int i = 0; i < L; ++i) {
        sum += x.g[c.row(i)];
        ws.G[c.row(i)] = sum;
      }
    }
  }
  __syncthreads();

  // A and P, one (i, j) pair per thread at a time.
  float* P = ws.P + (chunk * x.heads + head) * kChunk * kChunk;
  for (int p = threadIdx.x; p < L * L; p += blockDim.x) {
    const int i = p / L, j = p % L;
    float a = 0.0f, s = 0.0f;
    if (j <= i) {
      for (int d = 0; d < K; ++d) {
        const float kj = c.k(j, d);
        const float f = kDecay == ops::DecayKind::channel ? c.between(i, j, d) : 1.0f;
        a += c.erase(i, d) * c.k(i, d) * kj * f;
        s += c.q(i, d) * kj * f;
      }
      if constexpr (kDecay == ops::DecayKind::scalar) {
        const float f = c.between(i, j, 0);
        a *= f;
        s *= f;
      }
    }
    A[i][j] = j < i ? a : 0.0f;
    P[i * kChunk + j] = s;
  }
  for (int p = threadIdx.x; p < kChunk * kChunk; p += blockDim.x) {
    Tm[p / kChunk][p % kChunk] = p / kChunk == p % kChunk ? 1.0f : 0.0f;
  }
  __syncthreads();

  // T, row by row (row i needs the rows above it).
  for (int i = 1; i < L; ++i) {
    for (int j = threadIdx.x; j < i; j += blockDim.x) {
      float s = 0.0f;
      for (int m = j; m < i; ++m) s += A[i][m] * Tm[m][j];
      Tm[i][j] = -s;
    }
    __syncthreads();
  }
  float* T = ws.T + (chunk * x.heads + head) * kChunk * kChunk;
  for (int p = threadIdx.x; p < L * L; p += blockDim.x) T[(p / L) * kChunk + p % L] = Tm[p / L][p % L];

  for (int p = threadIdx.x; p < L * V; p += blockDim.x) {
    const int i = p / V, e = p % V;
    float u = 0.0f;
    for (int m = 0; m <= i; ++m) u += Tm[i][m] * c.write(m, e) * c.v(m, e);
    ws.U[c.value(i, e)] = u;
  }
  for (int p = threadIdx.x; p < L * K; p += blockDim.x) {
    const int i = p / K, d = p % K;
    float w = 0.0f;
    for (int m = 0; m <= i; ++m) w += Tm[i][m] * c.erase(m, d) * c.k(m, d) * c.gamma(m, d);
    ws.W[c.key(i, d)] = w;
    ws.Kend[c.key(i, d)] = c.k(i, d) * c.to_end(i, d);
    ws.Qg[c.key(i, d)] = x.scale * c.q(i, d) * c.gamma(i, d);
  }
}

}  // namespace

void intra_chunk(const Call& call, const Workspace& ws) {
  if (call.chunks.count == 0) return;
  dispatch_kinds(call, [&](auto element, auto decay, auto gate) {
    using E = decltype(element);
    const dim3 grid(static_cast<unsigned>(call.chunks.count), static_cast<unsigned>(call.heads));
    intra_chunk_kernel<E, decltype(decay)::value, decltype(gate)::value>
        <<<grid, kThreads>>>(operands<E>(call), call.chunks, ws);
    check_launch("delta_rule intra_chunk_kernel");
  });
}

}  // namespace linea::cuda::delta
