// intra: everything about one chunk of one head that does not depend on the state entering it
// (one block of 8 warps each), for the bf16 pipeline (kernels/cuda/delta_rule_bf16.cuh):
//   G_i  = Σ_{s≤i} g_s                                   (a warp scan; stored f32)
//   A_ij = β_i e_ij (K Kᵀ)_ij  (j < i)                    (K Kᵀ on the tensor cores, f32 in shared memory)
//   T    = (I + A)⁻¹                                      (f32, kernels/cuda/unit_lower_inverse.cuh; stored bf16)
//   W    = (T diag(βγ)) K,   U = (T diag(β)) V           (the row factors of K and V go with T's columns)
// Tiles: K [64, Kd] and V [64, 64] per 64 value columns (bf16, loaded once by cp.async), A and T
// [64][65] f32, T diag(βγ) and T diag(β) [64, 64] bf16. Bytes per chunk and head: reads K, V, β, g;
// writes G, T (8 KB), W, U.
#include "kernels/cuda/check.h"
#include "kernels/cuda/delta_rule_bf16.cuh"
#include "kernels/cuda/unit_lower_inverse.cuh"

namespace linea::cuda::delta::bf16path {

namespace {

constexpr int kPitch = kC + 1;

template <int Kd>
constexpr size_t intra_shared_bytes(int value_blocks) {
  return sizeof(bf16) * (kC * Kd + value_blocks * kC * kBV + 2 * kC * kC) + sizeof(float) * 2 * kC * kPitch;
}

template <int Kd, bool kDecay>
__global__ void __launch_bounds__(kThreads) intra_kernel(Problem p, Workspace ws) {
  extern __shared__ __align__(128) unsigned char shared[];
  const int64_t chunk = blockIdx.x;
  const int head = blockIdx.y, H = p.heads, K = p.key_dim, V = p.value_dim;
  const int value_blocks = (V + kBV - 1) / kBV;
  const Span s = chunk_span(p.chunks, chunk);
  const int L = s.len;
  const Tile<Kd> Ks{reinterpret_cast<bf16*>(shared)};
  bf16* const values = Ks.data + kC * Kd;  // value block b: [64, 64] at values + b · 64 · 64
  const Tile<kC> Tw{values + value_blocks * kC * kBV}, Tu{Tw.data + kC * kC};
  float(*A)[kPitch] = reinterpret_cast<float(*)[kPitch]>(Tu.data + kC * kC);
  float(*T)[kPitch] = A + kC;
  __shared__ float G[kC], beta[kC];

  stage_rows(Ks, p.k, s, H, head, K, 0);
  for (int b = 0; b < value_blocks; ++b) stage_rows(Tile<kBV>{values + b * kC * kBV}, p.v, s, H, head, V, b * kBV);
  mma::commit_copies();
  if (threadIdx.x < kC) {
    const int i = threadIdx.x;
    beta[i] = i < L ? __bfloat162float(p.beta[(s.first + i) * H + head]) : 0.0f;
  }
  if constexpr (kDecay) {
    // G by a warp scan: lane l sums rows 2l and 2l + 1, then the lanes' inclusive prefix sums.
    if (warp_index() == 0) {
      const int l = mma::lane_id(), i = 2 * l;
      const float g0 = i < L ? p.g[(s.first + i) * H + head] : 0.0f;
      const float g1 = i + 1 < L ? p.g[(s.first + i + 1) * H + head] : 0.0f;
      float sum = g0 + g1;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const float before = __shfl_up_sync(0xffffffffu, sum, o);
        if (l >= o) sum += before;
      }
      G[i] = sum - g1;
      G[i + 1] = sum;
      if (i < L) ws.G[(s.first + i) * H + head] = sum - g1;
      if (i + 1 < L) ws.G[(s.first + i + 1) * H + head] = sum;
    }
  }
  mma::wait_copies<0>();
  __syncthreads();
  // e_ij for j ≤ i < L (exponent ≤ 0), γ_j.
  const auto pair_decay = [&](int i, int j) { return kDecay ? expf(G[i] - G[j]) : 1.0f; };
  const auto gamma = [&](int j) { return kDecay ? expf(G[j]) : 1.0f; };

  // A: warp (rows 16 (w % 4).., columns 32 (w / 4)..) of K Kᵀ.
  const int m0 = warp_row0(), half = warp_half();
  {
    float kk[4][4] = {};
    mma::product<mma::Hold::as_is, mma::Hold::transposed>(kk, Ks, m0, Ks, 32 * half, Kd);
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      mma::for_pairs(kk[n], m0, 32 * half + 8 * n, [&](int i, int j, float x0, float x1) {
        A[i][j] = j < i && i < L ? x0 * beta[i] * pair_decay(i, j) : 0.0f;
        A[i][j + 1] = j + 1 < i && i < L ? x1 * beta[i] * pair_decay(i, j + 1) : 0.0f;
      });
    }
  }
  __syncthreads();
  invert_unit_lower<kPitch>(A, T);

  // T (stored), T diag(βγ) and T diag(β) as bf16 operands.
  bf16* const T_out = ws.T + (chunk * H + head) * kC * kC;
  for (int q = threadIdx.x; q < kC * kC / 2; q += blockDim.x) {
    const int i = q / (kC / 2), j = 2 * (q % (kC / 2));
    const float t0 = T[i][j], t1 = T[i][j + 1];
    *reinterpret_cast<uint32_t*>(T_out + i * kC + j) = mma::pack(t0, t1);
    put(Tu, i, j, t0 * beta[j], t1 * beta[j + 1]);
    put(Tw, i, j, t0 * beta[j] * gamma(j), t1 * beta[j + 1] * gamma(j + 1));
  }
  __syncthreads();

  // W = Tw K: warp rows 16 (w % 4).., key columns (w / 4) Kd/2.. .
  {
    constexpr int kN = Kd / 16;
    float w[kN][4] = {};
    mma::product<mma::Hold::as_is, mma::Hold::as_is>(w, Tw, m0, Ks, half * Kd / 2, kC);
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      mma::for_pairs(w[n], m0, half * Kd / 2 + 8 * n, [&](int i, int d, float x0, float x1) {
        if (i < L && d < K) put_global(ws.W, (s.first + i) * H + head, K, d, x0, x1);
      });
    }
  }
  // U = Tu V, by blocks of 64 value columns: warp columns 32 (w / 4).. of each.
  for (int b = 0; b < value_blocks; ++b) {
    float u[4][4] = {};
    mma::product<mma::Hold::as_is, mma::Hold::as_is>(u, Tu, m0, Tile<kBV>{values + b * kC * kBV}, 32 * half, kC);
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      mma::for_pairs(u[n], m0, 32 * half + 8 * n, [&](int i, int e, float x0, float x1) {
        if (i < L && b * kBV + e < V) put_global(ws.U, (s.first + i) * H + head, V, b * kBV + e, x0, x1);
      });
    }
  }
}

}  // namespace

void intra(const Problem& p, const Workspace& ws) {
  if (p.chunks.count == 0) return;
  const int value_blocks = static_cast<int>(ceil_div(p.value_dim, kBV));
  const dim3 grid(static_cast<unsigned>(p.chunks.count), static_cast<unsigned>(p.heads));
  const auto launch = [&](auto kernel, size_t bytes) {
    allow_shared_memory(reinterpret_cast<const void*>(kernel), bytes);
    kernel<<<grid, kThreads, bytes>>>(p, ws);
    check_launch("delta_rule bf16 intra_kernel");
  };
  dispatch_key_tile(p.key_dim, [&](auto tile) {
    constexpr int Kd = decltype(tile)::value;
    const size_t bytes = intra_shared_bytes<Kd>(value_blocks);
    p.g ? launch(intra_kernel<Kd, true>, bytes) : launch(intra_kernel<Kd, false>, bytes);
  });
}

}  // namespace linea::cuda::delta::bf16path
