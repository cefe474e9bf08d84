// intra_chunk: everything about one chunk of one head that does not depend on the state entering
// it, for all chunks of all heads at once (one block each). With L ≤ 64 the chunk's length, g the
// log decay, b the erase gate and w the write gate (both β for GateKind::beta):
//   G_i   = Σ_{s≤i} g_s                                     (per channel, or one per row)
//   A_ij  = Σ_d b_id k_id k_jd exp(G_id − G_jd)   (j < i)    P_ij = Σ_d q_id k_jd exp(G_id − G_jd)   (j ≤ i)
//   T     = (I + A)^{-1} (kernels/chunk/cuda/unit_lower_inverse.cuh: by blocks of 16 rows)
//   U     = T (w ⊙ V),   W = T (b ⊙ K ⊙ γ),   Kend = K ⊙ exp(G_L − G),   Qg = scale · Q ⊙ γ
// A and T stay in shared memory; G, P, T, U, W, Kend and Qg go to the workspace.
#include "kernels/chunk/cuda/block_gemm.cuh"
#include "kernels/chunk/cuda/unit_lower_inverse.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/warp_reduce.cuh"
#include "model/mixers/delta_rule/cuda/delta_rule_chunk.cuh"

namespace linea::cuda::delta {

namespace {

constexpr int kSubChunk = 16;
constexpr int kPitch = kChunk + 4;  // f32 rows of A and T: 16-byte quads (unit_lower_inverse.cuh)

template <ops::DecayKind kDecay, ops::GateKind kGate>
__global__ void __launch_bounds__(kThreads) intra_chunk_kernel(Operands x, Chunks chunks, Workspace ws) {
  constexpr bool kBeta = kGate == ops::GateKind::beta, kRowDecay = kDecay != ops::DecayKind::channel;
  const int64_t chunk = blockIdx.x;
  const int head = blockIdx.y;
  const int K = x.key_dim, V = x.value_dim;
  extern __shared__ __align__(16) float shared[];  // A and Tm, [C][kPitch] each
  float(*A)[kPitch] = reinterpret_cast<float(*)[kPitch]>(shared);
  float(*Tm)[kPitch] = A + kChunk;
  __shared__ BlockGemmTiles tiles;
  // Per row of the chunk: β (GateKind::beta), and for a decay that is one number per row, G,
  // γ = exp(G) and exp(G_L − G).
  __shared__ float beta_rows[kChunk], G_rows[kChunk], gamma_rows[kChunk], to_end_rows[kChunk];
  const ChunkRef<kDecay, kGate> c(x, chunks, ws.G, chunk, head);
  const int L = c.len;

  // G: a running sum down the chunk, one thread per channel (or one thread for a scalar decay).
  if constexpr (kDecay == ops::DecayKind::channel) {
    for (int d = threadIdx.x; d < K; d += blockDim.x) {
      float sum = 0.0f;
      for_rows_batched(
          L, [&](int i) { return x.g[c.key(i, d)]; },
          [&](int i, float g) {
            sum += g;
            ws.G[c.key(i, d)] = sum;
          });
    }
  } else if constexpr (kDecay == ops::DecayKind::scalar) {
    if (threadIdx.x == 0) {
      float sum = 0.0f;
      for_rows_batched(
          L, [&](int i) { return x.g[c.row(i)]; },
          [&](int i, float g) {
            sum += g;
            ws.G[c.row(i)] = G_rows[i] = sum;
          });
    }
  }
  if constexpr (kBeta) {
    for (int i = threadIdx.x; i < L; i += blockDim.x) beta_rows[i] = c.erase(i, 0);
  }
  for (int p = threadIdx.x; p < (kChunk - L) * kChunk; p += blockDim.x) A[L + p / kChunk][p % kChunk] = 0.0f;
  __syncthreads();
  for (int i = threadIdx.x; i < L; i += blockDim.x) {
    if constexpr (kDecay == ops::DecayKind::scalar) {
      gamma_rows[i] = expf(G_rows[i]);
      to_end_rows[i] = expf(G_rows[L - 1] - G_rows[i]);
    } else {
      gamma_rows[i] = to_end_rows[i] = 1.0f;
    }
  }

  // A and P. Without a per-channel decay, the decay of a pair is one factor: each is a product
  // Gram matrix, masked and scaled by exp(G_i − G_j) (and A by β_i with GateKind::beta, so that
  // both operands are token rows as they are).
  float* P = ws.P + (chunk * x.heads + head) * kChunk * kChunk;
  const Strided<float> key_rows{x.k + c.key(0, 0), int64_t{x.heads} * K},
      query_rows{x.q + c.key(0, 0), key_rows.stride};
  const Strided<float> value_rows{x.v + c.value(0, 0), int64_t{x.heads} * V};
  if constexpr (kRowDecay) {
    const auto pair_decay = [&](int i, int j) {
      if constexpr (kDecay == ops::DecayKind::scalar) {
        return expf(G_rows[i] - G_rows[j]);
      } else {
        return 1.0f;
      }
    };
    if constexpr (kBeta) {
      block_gemm<gemm::b_k_fast>(
          L, L, K, key_rows, key_rows,
          [&](int i, int j, float s) { A[i][j] = j < i ? s * beta_rows[i] * pair_decay(i, j) : 0.0f; }, tiles);
    } else {
      block_gemm<gemm::b_k_fast>(
          L, L, K, [&](int i, int d) { return c.erase(i, d) * c.k(i, d); }, key_rows,
          [&](int i, int j, float s) { A[i][j] = j < i ? s * pair_decay(i, j) : 0.0f; }, tiles);
    }
    block_gemm<gemm::b_k_fast>(
        L, L, K, query_rows, key_rows,
        [&](int i, int j, float s) { P[i * kChunk + j] = j <= i ? s * pair_decay(i, j) : 0.0f; }, tiles);
  } else {
    // Per channel, by sub-chunks of kSubChunk rows (reference/mixers.md §2.3): rows i ∈ [n, n + 16)
    // with the columns j < n are a product of rows rescaled to the reference row n,
    // (X_i ⊙ exp(G_i − G_n)) · (k_j ⊙ exp(G_n − G_j)); the pairs inside a sub-chunk go entry by entry.
    for (int n = kSubChunk; n < L; n += kSubChunk) {
      const int rows = min(kSubChunk, L - n);
      const auto to_ref = [&](int d, int j) { return c.k(j, d) * c.between(n, j, d); };
      block_gemm<gemm::b_k_fast>(
          rows, n, K, [&](int i, int d) { return c.erase(n + i, d) * c.k(n + i, d) * c.between(n + i, n, d); }, to_ref,
          [&](int i, int j, float s) { A[n + i][j] = s; }, tiles);
      block_gemm<gemm::b_k_fast>(
          rows, n, K, [&](int i, int d) { return c.q(n + i, d) * c.between(n + i, n, d); }, to_ref,
          [&](int i, int j, float s) { P[(n + i) * kChunk + j] = s; }, tiles);
    }
    // The pairs j ≤ i inside a sub-chunk: one warp per row i, its lanes over the channels (coalesced
    // loads), a warp sum per pair; the columns after i in the sub-chunk are 0.
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize, warps = blockDim.x / kWarpSize;
    for (int i = warp; i < L; i += warps) {
      const int n = i - i % kSubChunk;
      for (int j = n; j <= i; ++j) {
        float a = 0.0f, s = 0.0f;
        for (int d = lane; d < K; d += kWarpSize) {
          const float kf = c.k(j, d) * c.between(i, j, d);
          a += c.erase(i, d) * c.k(i, d) * kf;
          s += c.q(i, d) * kf;
        }
        a = warp_sum(a);
        s = warp_sum(s);
        if (lane == 0) {
          A[i][j] = j < i ? a : 0.0f;
          P[i * kChunk + j] = s;
        }
      }
      const int j = i + 1 + lane;
      if (j < n + kSubChunk) {
        A[i][j] = 0.0f;
        if (j < L) P[i * kChunk + j] = 0.0f;
      }
    }
    for (int p = threadIdx.x; p < L * L; p += blockDim.x) {  // above the diagonal sub-chunks
      const int i = p / L, j = p % L;
      if (j >= i - i % kSubChunk + kSubChunk) P[i * kChunk + j] = 0.0f;
    }
  }
  __syncthreads();

  invert_unit_lower(A, Tm);
  float* T = ws.T + (chunk * x.heads + head) * kChunk * kChunk;
  for (int p = threadIdx.x; p < L * L; p += blockDim.x) T[(p / L) * kChunk + p % L] = Tm[p / L][p % L];

  // U = T (w ⊙ V) and W = T (b ⊙ K ⊙ γ); the factors that are one number per row m (β, γ) go
  // with T's column m, so that the other operand is a token row as it is.
  if constexpr (kBeta) {
    block_gemm(
        L, V, L, [&](int i, int m) { return Tm[i][m] * beta_rows[m]; }, value_rows,
        [&](int i, int e, float u) { ws.U[c.value(i, e)] = u; }, tiles);
  } else {
    block_gemm(
        L, V, L, [&](int i, int m) { return Tm[i][m]; }, [&](int m, int e) { return c.write(m, e) * c.v(m, e); },
        [&](int i, int e, float u) { ws.U[c.value(i, e)] = u; }, tiles);
  }
  if constexpr (kBeta && kRowDecay) {
    block_gemm(
        L, K, L, [&](int i, int m) { return Tm[i][m] * beta_rows[m] * gamma_rows[m]; }, key_rows,
        [&](int i, int d, float w) { ws.W[c.key(i, d)] = w; }, tiles);
  } else {
    block_gemm(
        L, K, L, [&](int i, int m) { return Tm[i][m]; },
        [&](int m, int d) { return c.erase(m, d) * c.k(m, d) * c.gamma(m, d); },
        [&](int i, int d, float w) { ws.W[c.key(i, d)] = w; }, tiles);
  }
  for_each_batched<8>(
      L * K,
      [&](int p) {
        const int i = p / K, d = p % K;
        if constexpr (kRowDecay) {
          return float2{c.k(i, d) * to_end_rows[i], x.scale * c.q(i, d) * gamma_rows[i]};
        } else {
          return float2{c.k(i, d) * c.to_end(i, d), x.scale * c.q(i, d) * c.gamma(i, d)};
        }
      },
      [&](int p, float2 kend_qg) {
        ws.Kend[c.key(p / K, p % K)] = kend_qg.x;
        ws.Qg[c.key(p / K, p % K)] = kend_qg.y;
      });
}

}  // namespace

void intra_chunk(const Call& call, const Workspace& ws) {
  if (call.chunks.count == 0) return;
  dispatch_kinds(call, [&](auto decay, auto gate) {
    const auto kernel = intra_chunk_kernel<decltype(decay)::value, decltype(gate)::value>;
    constexpr size_t bytes = sizeof(float) * 2 * kChunk * kPitch;
    allow_shared_memory(reinterpret_cast<const void*>(kernel), bytes);
    kernel<<<chunk_grid(call), kThreads, bytes>>>(operands(call), call.chunks, ws);
    check_launch("delta_rule intra_chunk_kernel");
  });
}

}  // namespace linea::cuda::delta
