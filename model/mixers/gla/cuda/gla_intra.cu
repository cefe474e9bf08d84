// The per-(chunk, head) kernels of the CUDA gated-linear-attention family that need no state: the
// cumulated log decay G, the decayed causal Gram P and the output gradient's Gram dP
// (model/mixers/gla/cuda/gla_kernels.cuh has the notation).
#include "kernels/cuda/check.h"
#include "model/mixers/gla/cuda/gla_kernels.cuh"

namespace linea::cuda::gla {

namespace {

// G_i = Σ_{s ≤ i} g_s over the chunk's rows, per channel d (one thread each), or per token; a fixed
// decay per head adds g_h each row.
__global__ void cumulate_kernel(Call c, double* G) {
  const int64_t chunk = blockIdx.x;
  const int h = blockIdx.y, w = decay_width(c);
  const Span s = chunk_span(c, chunk);
  for (int d = threadIdx.x; d < w; d += blockDim.x) {
    double sum = 0.0;
    for (int i = 0; i < s.len; ++i) {
      const int64_t at = row_index(c, s.first + i, h) * w + d;
      sum += c.decay == ops::GlaDecay::head ? c.g[h] : c.g[at];
      G[at] = sum;
    }
  }
}

// A 64 × 64 product of a chunk's rows with its own rows over `depth` channels, the pairs (i, j)
// with j ≤ i (j < i when `strict`), i, j < L; zero elsewhere:
//   kDecayed (P):        out_ij = Σ_d q_id k_jd exp(R_id − G_jd)   (R_i ≤ G_j for j ≤ i: ≤ 1)
//   !kDecayed (dP):      out_ij = scale Σ_e dO_ie v_je
// Channels go through shared memory in tiles of 32 (dynamic: the f64 tiles of R and G, then the f32
// tiles of the two operands); thread (ty, tx) sums the pairs (4 ty + a, tx + 16 b), a, b < 4.
using Rows = float[kPitch];
using WideRows = double[kPitch];
constexpr size_t kPairsBytes = 2 * sizeof(double) * kC * kPitch + 2 * sizeof(float) * kC * kPitch;

template <class T, bool kDecayed>
__global__ void __launch_bounds__(kThreads) pairs_kernel(Call c, const double* G, const void* d_o, float* out) {
  extern __shared__ double wide_smem[];
  WideRows* ra = reinterpret_cast<WideRows*>(wide_smem);
  WideRows* gb = ra + kC;
  Rows* a_tile = reinterpret_cast<Rows*>(gb + kC);
  Rows* b_tile = a_tile + kC;
  const int64_t chunk = blockIdx.x;
  const int h = blockIdx.y;
  const Span s = chunk_span(c, chunk);
  const int depth = kDecayed ? c.key_dim : c.value_dim;
  const bool strict = kDecayed && c.bonus;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[4][4] = {};
  for (int d0 = 0; d0 < depth; d0 += kTile) {
    for (int p = threadIdx.x; p < kC * kTile; p += kThreads) {
      const int i = p / kTile, dd = p % kTile, d = d0 + dd;
      const bool inside = i < s.len && d < depth;
      const int64_t t = s.first + i;
      if constexpr (kDecayed) {
        a_tile[i][dd] = inside ? query<T>(c, t, h, d) : 0.0f;
        b_tile[i][dd] = inside ? key<T>(c, t, h, d) : 0.0f;
        ra[i][dd] = inside ? readout_decay(c, G, s, h, i, d) : 0.0;
        gb[i][dd] = inside ? cumulated(c, G, s, h, i, d) : 0.0;
      } else {
        a_tile[i][dd] = inside ? c.scale * token_value<T>(d_o, row_index(c, t, h) * c.value_dim + d) : 0.0f;
        b_tile[i][dd] = inside ? value<T>(c, t, h, d) : 0.0f;
      }
    }
    __syncthreads();
#pragma unroll 4
    for (int dd = 0; dd < kTile; ++dd) {
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        const int i = 4 * ty + a;
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          const int j = tx + 16 * b;
          if (i < s.len && (j < i || (j == i && !strict))) {
            const float x = a_tile[i][dd] * b_tile[j][dd];
            acc[a][b] += kDecayed ? x * decay_between(ra[i][dd], gb[j][dd]) : x;
          }
        }
      }
    }
    __syncthreads();
  }
  float* tile = out + (chunk * c.heads + h) * kC * kC;
#pragma unroll
  for (int a = 0; a < 4; ++a) {
#pragma unroll
    for (int b = 0; b < 4; ++b) tile[(4 * ty + a) * kC + tx + 16 * b] = acc[a][b];
  }
  if (kDecayed && c.bonus) {  // P_ii = Σ_d q_id u_d k_id (the pair (i, i) was left 0 above)
    __syncthreads();
    for (int i = threadIdx.x; i < s.len; i += kThreads) {
      float sum = 0.0f;
      for (int d = 0; d < c.key_dim; ++d) {
        sum += query<T>(c, s.first + i, h, d) * c.u[h * c.key_dim + d] * key<T>(c, s.first + i, h, d);
      }
      tile[i * kC + i] = sum;
    }
  }
}

template <class T, bool kDecayed>
void launch_pairs(const Call& c, const Workspace& ws, const void* d_o, float* out) {
  if (c.chunks.count == 0) return;
  const dim3 grid(static_cast<unsigned>(c.chunks.count), static_cast<unsigned>(c.heads));
  delta::allow_shared_memory(reinterpret_cast<const void*>(&pairs_kernel<T, kDecayed>), kPairsBytes);
  pairs_kernel<T, kDecayed><<<grid, kThreads, kPairsBytes>>>(c, ws.G, d_o, out);
  check_launch(kDecayed ? "gla gram" : "gla output_gram");
}

}  // namespace

void cumulate(const Call& c, const Workspace& ws) {
  if (c.chunks.count == 0) return;
  const dim3 grid(static_cast<unsigned>(c.chunks.count), static_cast<unsigned>(c.heads));
  cumulate_kernel<<<grid, 128>>>(c, ws.G);
  check_launch("gla cumulate");
}

void gram(const Call& c, const Workspace& ws) {
  if (c.bf16) return launch_pairs<__nv_bfloat16, true>(c, ws, nullptr, ws.P);
  launch_pairs<float, true>(c, ws, nullptr, ws.P);
}

void output_gram(const Call& c, const Workspace& ws, const void* d_o) {
  if (c.bf16) return launch_pairs<__nv_bfloat16, false>(c, ws, d_o, ws.dP);
  launch_pairs<float, false>(c, ws, d_o, ws.dP);
}

}  // namespace linea::cuda::gla
