// intra: everything about one chunk of one head that does not depend on the state entering it
// (one block of 8 warps each), for the bf16 pipeline (model/mixers/delta_rule/cuda/delta_rule_bf16.cuh):
//   G_i  = Σ_{s≤i} g_s                                   (a warp scan; stored f32)
//   A_ij = β_i e_ij (K Kᵀ)_ij  (j < i)                    (K Kᵀ on the tensor cores, f32 in shared memory)
//   T    = (I + A)⁻¹                                      (f32, kernels/chunk/cuda/unit_lower_inverse.cuh; stored bf16)
//   W    = (T diag(βγ)) K,   U = (T diag(β)) V           (the row factors of K and V go with T's columns)
// and, for the forward's output (with kOutput), O = scale (Q ⊙ γ) S + P Ũ rewritten without the
// state-dependent Ũ = U − W S:  O = Q' S + R V  with
//   P_ij = scale e_ij q_i·k_j (j ≤ i),   Q' = scale γ ⊙ Q − P W,   R = P T diag(β).
// The two terms scale γ Q S and P W S cancel where the chunk's keys overwrite what S holds; Q' takes
// the difference before any rounding to bf16, so O keeps bf16 accuracy there. Every bf16 operand
// computed here in f32 (T diag(βγ), T diag(β), W, P) enters these products as a pair hi + lo
// (hi = bf16(x), lo = bf16(x − hi)): X Y ≈ Xhi Yhi + Xlo Yhi + Xhi Ylo, 16 bits of mantissa.
// A plain write (Problem::plain: T = I, W = 0, U = V) forms G and, for the output, Q' = scale γ ⊙ Q
// and R = P only; it reads K, g (and Q) and stages only K (and Q).
// Tiles: K [64, Kd] and V [64, 64] per 64 value columns (bf16, loaded once by cp.async), later W
// hi and lo over them; Q; T diag(β) hi and lo; A and T [64][68] f32, T diag(βγ) hi and lo over A
// once T is formed, P hi and lo over both once W is. At Kd = V = 128 that is 99 KB, so two blocks
// share a multiprocessor and one block's loads and stores overlap the other's products. Bytes per
// chunk and head: reads K, V, β, g (and Q); writes G, T (8 KB), W, U (and Q', R (8 KB)). The results
// go to global memory from shared tiles, 16 bytes a thread and whole rows a warp (fragment-order
// stores would touch 8 rows per warp instruction): U by blocks over T's f32 region, W over K (or
// from its operand pair's hi half), Q' over Q and R over T diag(β)'s hi half once they are read.
#include <algorithm>

#include "kernels/chunk/cuda/unit_lower_inverse.cuh"
#include "kernels/cuda/check.h"
#include "model/mixers/delta_rule/cuda/delta_rule_bf16.cuh"
#include "model/mixers/delta_rule/cuda/delta_rule_bf16_channel.cuh"

namespace linea::cuda::delta::bf16path {

namespace {

constexpr int kPitch = kC + 4;  // f32 rows of A and T: 16-byte quads (unit_lower_inverse.cuh)

// Shared memory: the K and V rows (later W hi and lo), Q (kOutput), T diag(β) hi and lo, A and T
// f32 (later T diag(βγ) hi and lo over A, then P hi and lo over both).
template <int Kd>
constexpr size_t rows_elements(int value_blocks) {
  return static_cast<size_t>(kC) * (Kd + value_blocks * kBV > 2 * Kd ? Kd + value_blocks * kBV : 2 * Kd);
}
// A plain write stages K and Q only (Q right after K).
template <int Kd, bool kOutput>
size_t intra_shared_bytes(int value_blocks, bool plain) {
  if (plain) return sizeof(bf16) * kC * Kd * (kOutput ? 2 : 1);
  return sizeof(bf16) * (rows_elements<Kd>(value_blocks) + (kOutput ? kC * Kd : 0) + 2 * kC * kC) +
         sizeof(float) * 2 * kC * kPitch;
}

// Stores T (f32 [kC][kPitch] in shared memory) at T_out in bf16 and hands every pair of adjacent
// entries T_ij, T_i,j+1 to `pair` (the operand pairs made from T's columns).
template <class Pair>
__device__ __forceinline__ void store_unit_lower(const float (*T)[kPitch], bf16* T_out, Pair&& pair) {
  for (int q = threadIdx.x; q < kC * kC / 2; q += blockDim.x) {
    const int i = q / (kC / 2), j = 2 * (q % (kC / 2));
    const float t0 = T[i][j], t1 = T[i][j + 1];
    *reinterpret_cast<uint32_t*>(T_out + i * kC + j) = mma::pack(t0, t1);
    pair(i, j, t0, t1);
  }
}

// hi = bf16(x), lo = bf16(x − hi), for two adjacent entries of a pair of tiles.
template <int C>
__device__ __forceinline__ void put_split(const Tile<C>& hi, const Tile<C>& lo, int i, int j, float x0, float x1) {
  const float2 h = mma::unpack(mma::pack(x0, x1));
  put(hi, i, j, h.x, h.y);
  put(lo, i, j, x0 - h.x, x1 - h.y);
}

// acc (rows m0.., N column tiles n0..) += (Ahi + Alo)(Bhi + Blo) without Alo Blo (kSplitB), or
// (Ahi + Alo) Bhi, operands held as they are: per depth step every operand fragment is loaded once
// and feeds its two or three products (separate mma::product calls would load each again).
template <bool kSplitB, int N, int CA, int CB>
__device__ __forceinline__ void split_terms(float (&acc)[N][4], const Tile<CA>& a_hi, const Tile<CA>& a_lo, int m0,
                                            const Tile<CB>& b_hi, const Tile<CB>& b_lo, int n0, int depth) {
  static_assert(N % 2 == 0, "column tiles come in pairs");
#pragma unroll 2
  for (int k = 0; k < depth; k += 16) {
    uint32_t ah[4], al[4];
    mma::a_mk(ah, a_hi, m0, k);
    mma::a_mk(al, a_lo, m0, k);
#pragma unroll
    for (int j = 0; j < N; j += 2) {
      uint32_t bh[2][2];
      mma::b_kn(bh, b_hi, k, n0 + 8 * j);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        mma::mma(acc[j + h], ah, bh[h]);
        mma::mma(acc[j + h], al, bh[h]);
      }
      if constexpr (kSplitB) {
        uint32_t bl[2][2];
        mma::b_kn(bl, b_lo, k, n0 + 8 * j);
#pragma unroll
        for (int h = 0; h < 2; ++h) mma::mma(acc[j + h], ah, bl[h]);
      }
    }
  }
}
template <int N, int CA, int CB>
__device__ __forceinline__ void split_product(float (&acc)[N][4], const Tile<CA>& a_hi, const Tile<CA>& a_lo, int m0,
                                              const Tile<CB>& b_hi, const Tile<CB>& b_lo, int n0, int depth) {
  split_terms<true>(acc, a_hi, a_lo, m0, b_hi, b_lo, n0, depth);
}
// acc += (Ahi + Alo) B.
template <int N, int CA, int CB>
__device__ __forceinline__ void split_left_product(float (&acc)[N][4], const Tile<CA>& a_hi, const Tile<CA>& a_lo,
                                                   int m0, const Tile<CB>& b, int n0, int depth) {
  split_terms<false>(acc, a_hi, a_lo, m0, b, b, n0, depth);
}

// Two blocks a multiprocessor up to Kd = 128 (at most 128 registers a thread).
template <int Kd, bool kDecay, bool kOutput>
__global__ void __launch_bounds__(kThreads, Kd <= 128 ? 2 : 1) intra_kernel(Problem p, Workspace ws) {
  extern __shared__ __align__(128) unsigned char shared[];
  const int64_t chunk = blockIdx.x;
  const int head = blockIdx.y, H = p.heads, K = p.key_dim, V = p.value_dim;
  const int value_blocks = (V + kBV - 1) / kBV;
  const Span s = chunk_span(p.chunks, chunk);
  const int L = s.len;
  bf16* const rows = reinterpret_cast<bf16*>(shared);
  const Tile<Kd> Ks{rows}, Qs{rows + (p.plain ? kC * Kd : rows_elements<Kd>(value_blocks))};
  bf16* const values = Ks.data + kC * Kd;  // value block b: [64, 64] at values + b · 64 · 64
  const Tile<Kd> W_hi{rows}, W_lo{rows + kC * Kd};
  const Tile<kC> Tu_hi{Qs.data + (kOutput ? kC * Kd : 0)}, Tu_lo{Tu_hi.data + kC * kC};
  float(*A)[kPitch] = reinterpret_cast<float(*)[kPitch]>(Tu_lo.data + kC * kC);
  float(*T)[kPitch] = A + kC;
  static_assert(2 * kC * kC * sizeof(bf16) <= kC * kPitch * sizeof(float), "two bf16 tiles fit over A");
  const Tile<kC> Tw_hi{reinterpret_cast<bf16*>(A)}, Tw_lo{Tw_hi.data + kC * kC};  // once T is formed
  const Tile<kC> P_hi{reinterpret_cast<bf16*>(A)}, P_lo{P_hi.data + kC * kC};     // once W is formed
  __shared__ float G[kC], beta[kC];

  stage_rows(Ks, p.k, s, H, head, K, 0);
  if (!p.plain) {
    for (int b = 0; b < value_blocks; ++b) stage_rows(Tile<kBV>{values + b * kC * kBV}, p.v, s, H, head, V, b * kBV);
  }
  if constexpr (kOutput) stage_rows(Qs, p.q, s, H, head, K, 0);
  mma::commit_copies();
  if (threadIdx.x < kC && !p.plain) {
    const int i = threadIdx.x;
    beta[i] = i < L ? __bfloat162float(p.beta[(s.first + i) * H + head]) : 0.0f;
  }
  if constexpr (kDecay) {
    // G by a warp scan: lane l sums rows 2l and 2l + 1, then the lanes' inclusive prefix sums.
    if (warp_index() == 0) {
      const int l = mma::lane_id(), i = 2 * l;
      const float g0 = i < L ? p.g[(s.first + i) * p.g_token_stride + head] : 0.0f;
      const float g1 = i + 1 < L ? p.g[(s.first + i + 1) * p.g_token_stride + head] : 0.0f;
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
  const int m0 = warp_row0(), half = warp_half();
  // P_ij = scale e_ij (Q Kᵀ)_ij (j ≤ i < L, else 0) from the warp's entries of Q Kᵀ.
  const auto scaled_pair = [&](int i, int j, float x) {
    return j <= i && i < L ? p.scale * x * pair_decay(i, j) : 0.0f;
  };

  if (p.plain) {  // T = I, W = 0, U = V: the output's Q' = scale γ ⊙ Q and R = P alone
    if constexpr (kOutput) {
      float pk[4][4] = {};
      mma::product<mma::Hold::as_is, mma::Hold::transposed>(pk, Qs, m0, Ks, 32 * half, Kd);
      bf16* const R_out = ws.R + (chunk * H + head) * kC * kC;
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        mma::for_pairs(pk[n], m0, 32 * half + 8 * n, [&](int i, int j, float x0, float x1) {
          *reinterpret_cast<uint32_t*>(R_out + i * kC + j) =
              mma::pack(scaled_pair(i, j, x0), scaled_pair(i, j + 1, x1));
        });
      }
      for (int q = threadIdx.x; q < L * (K / 2); q += blockDim.x) {
        const int i = q / (K / 2), d = 2 * (q % (K / 2));
        const float2 x = get(Qs, i, d);
        const float f = p.scale * gamma(i);
        put_global(ws.Qe, (s.first + i) * H + head, K, d, f * x.x, f * x.y);
      }
    }
    return;
  }

  // A: warp (rows 16 (w % 4).., columns 32 (w / 4)..) of K Kᵀ.
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

  // T (stored), T diag(βγ) and T diag(β) as operand pairs.
  store_unit_lower(T, ws.T + (chunk * H + head) * kC * kC, [&](int i, int j, float t0, float t1) {
    const float u0 = t0 * beta[j], u1 = t1 * beta[j + 1];
    put_split(Tu_hi, Tu_lo, i, j, u0, u1);
    put_split(Tw_hi, Tw_lo, i, j, u0 * gamma(j), u1 * gamma(j + 1));
  });
  __syncthreads();

  // W = Tw K: warp rows 16 (w % 4).., key columns (w / 4) Kd/2.. .
  constexpr int kN = Kd / 16;
  const int c0 = half * Kd / 2;
  float w[kN][4] = {};
  split_left_product(w, Tw_hi, Tw_lo, m0, Ks, c0, kC);
  // U = Tu V, by blocks of 64 value columns: warp columns 32 (w / 4).. of each, staged in T's f32
  // region (free once T is stored; two blocks fit) and stored 16 bytes a thread.
  static_assert(2 * kC * kBV * sizeof(bf16) <= kC * kPitch * sizeof(float), "two U blocks fit over T");
  for (int b = 0; b < value_blocks; ++b) {
    float u[4][4] = {};
    const Tile<kBV> Vb{values + b * kC * kBV}, Ub{reinterpret_cast<bf16*>(T) + (b & 1) * kC * kBV};
    split_left_product(u, Tu_hi, Tu_lo, m0, Vb, 32 * half, kC);
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      mma::for_pairs(u[n], m0, 32 * half + 8 * n, [&](int i, int e, float x0, float x1) { put(Ub, i, e, x0, x1); });
    }
    __syncthreads();  // block b is staged (and the slot's block b − 2 stored)
    store_rows(ws.U, Ub, s, H, head, V, b * kBV);
  }
  // W, staged over K (read by now) or, with the output, as the hi half of its operand pair.
  if constexpr (kOutput) {
    float pk[4][4] = {};
    mma::product<mma::Hold::as_is, mma::Hold::transposed>(pk, Qs, m0, Ks, 32 * half, Kd);  // Q Kᵀ
    __syncthreads();  // K, V, T diag(βγ) and T are read: W and P go over them
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      mma::for_pairs(w[n], m0, c0 + 8 * n,
                     [&](int i, int d, float x0, float x1) { put_split(W_hi, W_lo, i, d, x0, x1); });
    }
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      mma::for_pairs(pk[n], m0, 32 * half + 8 * n, [&](int i, int j, float x0, float x1) {
        put_split(P_hi, P_lo, i, j, scaled_pair(i, j, x0), scaled_pair(i, j + 1, x1));
      });
    }
    __syncthreads();
    store_rows(ws.W, W_hi, s, H, head, K, 0);
    // Q' = scale γ ⊙ Q − P W, over Q in place (each entry read and written by one thread).
    float pw[kN][4] = {};
    split_product(pw, P_hi, P_lo, m0, W_hi, W_lo, c0, kC);
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      mma::for_pairs(pw[n], m0, c0 + 8 * n, [&](int i, int d, float x0, float x1) {
        const float2 q = get(Qs, i, d);
        const float f = p.scale * gamma(i);
        put(Qs, i, d, f * q.x - x0, f * q.y - x1);
      });
    }
    // R = P T diag(β), staged over T diag(β)'s hi half once every warp has read it.
    float r[4][4] = {};
    split_product(r, P_hi, P_lo, m0, Tu_hi, Tu_lo, 32 * half, kC);
    __syncthreads();
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      mma::for_pairs(r[n], m0, 32 * half + 8 * n, [&](int i, int m, float x0, float x1) { put(Tu_hi, i, m, x0, x1); });
    }
    __syncthreads();
    store_rows(ws.Qe, Qs, s, H, head, K, 0);
    store_matrix(ws.R + (chunk * H + head) * kC * kC, Tu_hi, kC, kC, kC, kC, 0);
  } else {  // the U loop's barriers came after every warp's W product: W goes over K
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      mma::for_pairs(w[n], m0, c0 + 8 * n, [&](int i, int d, float x0, float x1) { put(Ks, i, d, x0, x1); });
    }
    __syncthreads();
    store_rows(ws.W, Ks, s, H, head, K, 0);
  }
}

// ---- a decay per channel (KDA, GDN-2) -------------------------------------------------------------
//
// With x_i = k_i (β gate, β_i applied to A's rows and T's columns) or b_i ⊙ k_i (GDN-2), and
// T' = T diag(β) or T:
//   A_ij = Σ_d x_id k_jd e_ijd,  P_ij = scale Σ_d q_id k_jd e_ijd   (row sums of
//          delta_rule_bf16_channel.cuh: left rows x_i ⊙ exp(G_i − G_n), q_i ⊙ exp(G_i − G_n), block
//          I's row reach of K; the steep channels' pairs inside a block one by one)
//   W = T' (x ⊙ γ),  U = T' V'  (V' = V, or w ⊙ V),  K ⊙ exp(G_L − G) and G_L for the state passes;
//   forward: Q' = scale Q ⊙ γ − P W, R = P T' (O = Q' S + R V'), GDN-2's V';
//   backward: scale Q ⊙ γ and P for state_backward.
// x ⊙ γ enters W as a pair hi + lo like T' (the forward's Q' takes the difference of two close
// terms). A plain write forms P, K ⊙ exp(G_L − G), G_L and scale Q ⊙ γ only (T' = I, W = 0, R = P).
// RWKV-6's bonus readout (kBonus, a plain write; o_t reads S_{t−1} and the bonus u [H, K]):
//   P_ij = scale Σ_d q_id k_jd exp(R_id − G_jd) (j < i, R_i = G_{i−1}, R_0 = 0: the factorization
//          with a shift of 1, delta_rule_bf16_channel.cuh),  P_ii = scale Σ_d q_id u_d k_id,
//   scale Q ⊙ exp(R) for scale Q ⊙ γ (Q' of the output and Qg of the backward);
// the state passes read them as they are (O = Q' S + P V, dŨ = Pᵀ dO + Kend dS = dv, dS's Qgᵀ dO).
// The diagonal is summed per pass from the staged Q and K tiles, before they are rescaled in place.
// The key columns run in passes of Kt = min(Kd, 128): A and P accumulate over the passes,
// W, Q' and the rest are per column. Tiles (Kt = 128): K and Q of the pass (the left operands in
// place), G f32, a region for the reach operands (160 rows), then A and T f32, then x ⊙ γ hi and lo,
// then W hi and lo; T' hi and lo, P hi and lo; two value blocks (and two of w): 154 KB (GDN-2:
// 170 KB), one block a multiprocessor.
template <int Kd, ops::GateKind kGate, int kShift = 0>
struct ChannelIntraShared {
  static constexpr int Kt = Kd < 128 ? Kd : 128;
  static constexpr bool kGated = kGate == ops::GateKind::erase_write;
  static constexpr size_t kRegion =
      std::max({sizeof(bf16) * channel::kReachRows * Kt, sizeof(float) * 2 * kC* kPitch, sizeof(bf16) * 2 * kC* Kt});
  static constexpr size_t kValueBlocks = kGated ? 4 : 2;
  // A plain write uses none of the tiles after the region (T', P as operand pairs, V blocks): without
  // them two blocks fit on a multiprocessor (Kd = 128: 107 KB).
  static constexpr size_t bytes(bool plain) {
    return sizeof(bf16) * 2 * kC * Kt + channel::DecayTile<Kt>::kBytes + kRegion +
           (plain ? 0 : sizeof(bf16) * (4 + kValueBlocks) * kC * kC);
  }
  Tile<Kt> K, Q;
  channel::DecayTile<Kt, kShift> decay;
  unsigned char* region;
  Tile<kC> Tu_hi, Tu_lo, P_hi, P_lo;
  bf16* values;  // V block b at values + (b % 2) C², w's at values + (2 + b % 2) C²
  __device__ ChannelIntraShared(unsigned char* base, uint32_t* steep) {
    bf16* const p = reinterpret_cast<bf16*>(base);
    K.data = p, Q.data = p + kC * Kt;
    decay.G = reinterpret_cast<float*>(p + 2 * kC * Kt);
    decay.steep = steep;
    region = base + sizeof(bf16) * 2 * kC * Kt + channel::DecayTile<Kt>::kBytes;
    bf16* const q = reinterpret_cast<bf16*>(region + kRegion);
    Tu_hi.data = q, Tu_lo.data = q + kC * kC, P_hi.data = q + 2 * kC * kC, P_lo.data = q + 3 * kC * kC;
    values = q + 4 * kC * kC;
  }
};

// kBonus: RWKV-6's readout (p.u set, p.plain, the β gate).
template <int Kd, ops::GateKind kGate, bool kOutput, bool kBonus>
__global__ void __launch_bounds__(kThreads) intra_channel_kernel(Problem p, Workspace ws) {
  static_assert(!kBonus || kGate == ops::GateKind::beta, "the bonus readout is a plain write");
  constexpr int kShift = kBonus ? 1 : 0;  // the query side's decay R_i = G_{i − kShift}
  using Shared = ChannelIntraShared<Kd, kGate, kShift>;
  constexpr int Kt = Shared::Kt, kN = Kt / 16;
  constexpr bool kGated = Shared::kGated;
  extern __shared__ __align__(128) unsigned char shared[];
  __shared__ uint32_t steep[channel::kBlocks][Kt / 32];
  __shared__ float beta[kC];
  __shared__ float bonus_diagonal[kBonus ? kC : 1];  // Σ_d q_id u_d k_id
  const Shared sm(shared, &steep[0][0]);
  const int64_t chunk = blockIdx.x;
  const int head = blockIdx.y, H = p.heads, K = p.key_dim, V = p.value_dim;
  const Span s = chunk_span(p.chunks, chunk);
  const int L = s.len, passes = (K + Kt - 1) / Kt, value_blocks = (V + kBV - 1) / kBV;
  const int m0 = warp_row0(), half = warp_half(), block = warp_index() & 3, c0 = half * Kt / 2;
  bf16* const reach = reinterpret_cast<bf16*>(sm.region);
  float(*A)[kPitch] = reinterpret_cast<float(*)[kPitch]>(sm.region);
  float(*T)[kPitch] = A + kC;
  const Tile<Kt> Y_hi{reach}, Y_lo{reach + kC * Kt};  // later W hi and lo
  const channel::DecayTile<Kt, kShift>& dt = sm.decay;

  // x_id (key column k0 + d), from the K tile.
  const auto x_entry = [&](int i, int d, int k0) {
    const float k = entry(sm.K, i, d);
    if constexpr (kGated) {
      return i < L && k0 + d < K ? k * __bfloat162float(p.b[((s.first + i) * H + head) * K + k0 + d]) : 0.0f;
    } else {
      return k;
    }
  };
  const auto stage_values = [&](int b) {
    stage_rows(Tile<kBV>{sm.values + (b & 1) * kC * kBV}, p.v, s, H, head, V, b * kBV);
    if constexpr (kGated) stage_rows(Tile<kBV>{sm.values + (2 + (b & 1)) * kC * kBV}, p.w, s, H, head, V, b * kBV);
  };
  if (threadIdx.x < kC) {
    const int i = threadIdx.x;
    beta[i] = kGated || p.plain ? 1.0f : i < L ? __bfloat162float(p.beta[(s.first + i) * H + head]) : 0.0f;
  }

  // A (not for a plain write) and P over the passes: warp entries rows 16 block.., columns 32 half.. .
  float kk[4][4] = {}, pk[4][4] = {};
  // kBonus: the thread's part of row threadIdx.x / 4's diagonal (the pass's 16-byte pieces
  // threadIdx.x % 4, + 4, …), summed over the passes.
  static_assert(!kBonus || kThreads == 4 * kC, "four threads a row of the bonus diagonal");
  float diagonal_part = 0.0f;
  for (int pass = 0; pass < passes; ++pass) {
    const int k0 = pass * Kt;
    if (pass > 0) __syncthreads();  // the previous pass's operands are read
    stage_rows(sm.K, p.k, s, H, head, K, k0);
    stage_rows(sm.Q, p.q, s, H, head, K, k0);
    if (pass == 0 && !p.plain) {
      stage_values(0);
      if (value_blocks > 1) stage_values(1);
    }
    mma::commit_copies();
    dt.load(p.g, s, H, head, K, k0, ws.Glast + (chunk * H + head) * int64_t{K});
    mma::wait_copies<0>();
    __syncthreads();
    // The steep channels' pairs inside the warp's block (columns 16 block.. are the warp's n-tiles
    // 2 (block % 2) and the next when half = block / 2).
    if (half == block / 2) {
      const int nt = 2 * (block & 1);
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        mma::for_entries(m0, 32 * half + 8 * (nt + t), [&](int i, int j, int r) {
          if (j > i - kShift || i >= L) return;  // P's pairs: j ≤ i, or j < i with the shift
          float a = 0.0f, pq = 0.0f;
          channel::for_steep(dt, block, [&](int d) {
            const float kj = entry(sm.K, j, d) * expf(dt.readout(i, d) - dt.at(j, d));
            a += x_entry(i, d, k0) * kj;
            pq += entry(sm.Q, i, d) * kj;
          });
          if (j < i) kk[nt + t][r] += a;
          pk[nt + t][r] += pq;
        });
      }
    }
    channel::fill_row_reach<Kt>(reach, dt, [&](int j, int d) { return entry(sm.K, j, d); });
    if constexpr (kBonus) {  // from Q and K as staged (rescaled below)
      const int i = threadIdx.x >> 2;
      const float* const u = p.u + static_cast<int64_t>(head) * K + k0;
      for (int c = 8 * (threadIdx.x & 3); c < Kt && k0 + c < K; c += 32) {  // K: a multiple of 8
        const uint4 qx = *reinterpret_cast<const uint4*>(sm.Q.at(i, c));
        const uint4 kx = *reinterpret_cast<const uint4*>(sm.K.at(i, c));
        const uint32_t* const qw = reinterpret_cast<const uint32_t*>(&qx);
        const uint32_t* const kw = reinterpret_cast<const uint32_t*>(&kx);
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          const float2 qv = mma::unpack(qw[w]), kv = mma::unpack(kw[w]);
          diagonal_part += qv.x * u[c + 2 * w] * kv.x + qv.y * u[c + 2 * w + 1] * kv.y;
        }
      }
    }
    __syncthreads();
    // The left operands in place: x_i ⊙ exp(G_i − G_n), q_i ⊙ exp(G_i − G_n) (exp(R_i − R_n) with the
    // shift).
    for (int q = threadIdx.x; q < kC * Kt / 2; q += blockDim.x) {
      const int i = q / (Kt / 2), d = 2 * (q % (Kt / 2));
      const float f0 = channel::row_near(dt, i, d), f1 = channel::row_near(dt, i, d + 1);
      const float2 qv = get(sm.Q, i, d);
      const float x0 = x_entry(i, d, k0), x1 = x_entry(i, d + 1, k0);
      put(sm.K, i, d, f0 * x0, f1 * x1);
      put(sm.Q, i, d, f0 * qv.x, f1 * qv.y);
    }
    __syncthreads();
    const Tile<Kt> reach_rows = channel::row_reach<Kt>(reach, block);
#pragma unroll
    for (int jp = 0; jp < 2; ++jp) {
      const int J = 2 * half + jp;  // the 16 columns 16 J..; only J ≤ block has pairs j ≤ i
      if (J > block) break;
      if (!p.plain) {
        mma::product<mma::Hold::as_is, mma::Hold::transposed>(reinterpret_cast<float(&)[2][4]>(kk[2 * jp]), sm.K, m0,
                                                              reach_rows, 16 * J, Kt);
      }
      mma::product<mma::Hold::as_is, mma::Hold::transposed>(reinterpret_cast<float(&)[2][4]>(pk[2 * jp]), sm.Q, m0,
                                                            reach_rows, 16 * J, Kt);
    }
  }
  if constexpr (kBonus) {  // the row's four parts, in a fixed order
    diagonal_part += __shfl_xor_sync(0xffffffffu, diagonal_part, 1);
    diagonal_part += __shfl_xor_sync(0xffffffffu, diagonal_part, 2);
    if ((threadIdx.x & 3) == 0) bonus_diagonal[threadIdx.x >> 2] = diagonal_part;
  }
  __syncthreads();  // the reach operands are read: A and T go over them
  if (!p.plain) {
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      mma::for_pairs(kk[n], m0, 32 * half + 8 * n, [&](int i, int j, float x0, float x1) {
        A[i][j] = j < i && i < L ? x0 * beta[i] : 0.0f;
        A[i][j + 1] = j + 1 < i && i < L ? x1 * beta[i] : 0.0f;
      });
    }
    __syncthreads();
    invert_unit_lower<kPitch>(A, T);

    // T (stored), T' = T diag(β) (or T) as an operand pair.
    store_unit_lower(T, ws.T + (chunk * H + head) * kC * kC, [&](int i, int j, float t0, float t1) {
      put_split(sm.Tu_hi, sm.Tu_lo, i, j, t0 * beta[j], t1 * beta[j + 1]);
    });
  }
  // P (scaled, j ≤ i; with the bonus j < i and the bonus diagonal): stored for the backward where
  // ws.P is given; for the output, as an operand pair (or R = P itself, for a plain write).
  bf16* const R_out = kOutput ? ws.R + (chunk * H + head) * kC * kC : nullptr;
  const auto scaled_pair = [&](int i, int j, float x) {
    if (kBonus && j == i) return i < L ? p.scale * bonus_diagonal[i] : 0.0f;
    return j <= i - kShift && i < L ? p.scale * x : 0.0f;
  };
#pragma unroll
  for (int n = 0; n < 4; ++n) {
    mma::for_pairs(pk[n], m0, 32 * half + 8 * n, [&](int i, int j, float x0, float x1) {
      const float e0 = scaled_pair(i, j, x0), e1 = scaled_pair(i, j + 1, x1);
      if constexpr (kOutput) {
        if (p.plain) {
          *reinterpret_cast<uint32_t*>(R_out + i * kC + j) = mma::pack(e0, e1);
        } else {
          put_split(sm.P_hi, sm.P_lo, i, j, e0, e1);
        }
      }
      if (ws.P) *reinterpret_cast<uint32_t*>(ws.P + (chunk * H + head) * kC * kC + i * kC + j) = mma::pack(e0, e1);
    });
  }
  __syncthreads();

  // Per pass of key columns: W = T' (x ⊙ γ), K ⊙ exp(G_L − G), scale Q ⊙ γ (for the backward, where
  // ws.Qg is given; scale Q ⊙ exp(R) with the bonus) and Q' = scale Q ⊙ γ − P W (the forward's
  // output).
  for (int pass = 0; pass < passes; ++pass) {
    const int k0 = pass * Kt;
    if (pass > 0) __syncthreads();  // the previous pass's tiles are read
    stage_rows(sm.K, p.k, s, H, head, K, k0);
    stage_rows(sm.Q, p.q, s, H, head, K, k0);
    mma::commit_copies();
    if (passes > 1) dt.load(p.g, s, H, head, K, k0, nullptr);
    mma::wait_copies<0>();
    __syncthreads();
    for (int q = threadIdx.x; q < kC * Kt / 2; q += blockDim.x) {
      const int i = q / (Kt / 2), d = 2 * (q % (Kt / 2));
      const float g0 = expf(dt.at(i, d)), g1 = expf(dt.at(i, d + 1));
      if (!p.plain) put_split(Y_hi, Y_lo, i, d, x_entry(i, d, k0) * g0, x_entry(i, d + 1, k0) * g1);
      if (i < L && k0 + d < K) {
        const float2 k = get(sm.K, i, d), qv = get(sm.Q, i, d);
        const int64_t row = (s.first + i) * H + head;
        put_global(ws.Kend, row, K, k0 + d, k.x * expf(dt.at(kC - 1, d) - dt.at(i, d)),
                   k.y * expf(dt.at(kC - 1, d + 1) - dt.at(i, d + 1)));
        // the query side's exp(R_i): γ_i, or exp(G_{i−1}) with the bonus
        const float r0 = kBonus ? expf(dt.readout(i, d)) : g0, r1 = kBonus ? expf(dt.readout(i, d + 1)) : g1;
        if (ws.Qg) put_global(ws.Qg, row, K, k0 + d, p.scale * r0 * qv.x, p.scale * r1 * qv.y);
        if (kOutput && p.plain) put_global(ws.Qe, row, K, k0 + d, p.scale * r0 * qv.x, p.scale * r1 * qv.y);
      }
    }
    if (p.plain) continue;  // no W: Q' = scale Q ⊙ γ
    __syncthreads();
    float w[kN][4] = {};
    split_product(w, sm.Tu_hi, sm.Tu_lo, m0, Y_hi, Y_lo, c0, kC);
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      mma::for_pairs(w[n], m0, c0 + 8 * n, [&](int i, int d, float x0, float x1) {
        if (i < L && k0 + d < K) put_global(ws.W, (s.first + i) * H + head, K, k0 + d, x0, x1);
      });
    }
    if constexpr (kOutput) {
      __syncthreads();  // x ⊙ γ is read: W goes over it
#pragma unroll
      for (int n = 0; n < kN; ++n) {
        mma::for_pairs(w[n], m0, c0 + 8 * n,
                       [&](int i, int d, float x0, float x1) { put_split(Y_hi, Y_lo, i, d, x0, x1); });
      }
      __syncthreads();
      float pw[kN][4] = {};
      split_product(pw, sm.P_hi, sm.P_lo, m0, Y_hi, Y_lo, c0, kC);
#pragma unroll
      for (int n = 0; n < kN; ++n) {
        mma::for_pairs(pw[n], m0, c0 + 8 * n, [&](int i, int d, float x0, float x1) {
          if (i < L && k0 + d < K) {
            const float2 q = get(sm.Q, i, d);
            const float f0 = p.scale * expf(dt.at(i, d)), f1 = p.scale * expf(dt.at(i, d + 1));
            put_global(ws.Qe, (s.first + i) * H + head, K, k0 + d, f0 * q.x - x0, f1 * q.y - x1);
          }
        });
      }
    }
  }

  if (p.plain) return;  // U = V, R = P

  // U = T' V' by blocks of 64 value columns (blocks 0 and 1 came with the first K; block b + 2
  // loads into b's buffer once b is done).
  __syncthreads();
  for (int b = 0; b < value_blocks; ++b) {
    if (b >= 2) {
      if (b + 1 < value_blocks) {
        mma::wait_copies<1>();
      } else {
        mma::wait_copies<0>();
      }
      __syncthreads();
    }
    const Tile<kBV> Vb{sm.values + (b & 1) * kC * kBV};
    if constexpr (kGated) {
      const Tile<kBV> Wb{sm.values + (2 + (b & 1)) * kC * kBV};
      for (int q = threadIdx.x; q < kC * kBV / 2; q += blockDim.x) {
        const int i = q / (kBV / 2), e = 2 * (q % (kBV / 2));
        const float2 v = get(Vb, i, e), wg = get(Wb, i, e);
        put(Vb, i, e, wg.x * v.x, wg.y * v.y);
      }
      __syncthreads();
      if constexpr (kOutput) store_rows(ws.Vw, Vb, s, H, head, V, b * kBV);
    }
    float u[4][4] = {};
    split_left_product(u, sm.Tu_hi, sm.Tu_lo, m0, Vb, 32 * half, kC);
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      mma::for_pairs(u[n], m0, 32 * half + 8 * n, [&](int i, int e, float x0, float x1) {
        if (i < L && b * kBV + e < V) put_global(ws.U, (s.first + i) * H + head, V, b * kBV + e, x0, x1);
      });
    }
    __syncthreads();  // block b's buffers are read
    if (b + 2 < value_blocks) {
      stage_values(b + 2);
      mma::commit_copies();
    }
  }
  if constexpr (kOutput) {
    float r[4][4] = {};
    split_product(r, sm.P_hi, sm.P_lo, m0, sm.Tu_hi, sm.Tu_lo, 32 * half, kC);
    bf16* const R_out = ws.R + (chunk * H + head) * kC * kC;
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      mma::for_pairs(r[n], m0, 32 * half + 8 * n, [&](int i, int m, float x0, float x1) {
        *reinterpret_cast<uint32_t*>(R_out + i * kC + m) = mma::pack(x0, x1);
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
  const bool output = ws.Qe != nullptr;
  dispatch_key_tile(p.key_dim, [&](auto tile) {
    constexpr int Kd = decltype(tile)::value;
    dispatch_kinds(p.decay, p.gate, [&](auto decay, auto gate) {
      constexpr ops::DecayKind kDecay = decltype(decay)::value;
      constexpr ops::GateKind kGate = decltype(gate)::value;
      if constexpr (kDecay == ops::DecayKind::channel) {
        const auto with_bonus = [&](auto bonus) {
          constexpr bool kBonus = decltype(bonus)::value;
          const size_t bytes = ChannelIntraShared < Kd, kGate, kBonus ? 1 : 0 > ::bytes(p.plain);
          output ? launch(intra_channel_kernel<Kd, kGate, true, kBonus>, bytes)
                 : launch(intra_channel_kernel<Kd, kGate, false, kBonus>, bytes);
        };
        if constexpr (kGate == ops::GateKind::beta) {
          if (p.u) return with_bonus(std::true_type{});
        }
        with_bonus(std::false_type{});
      } else {
        constexpr bool kScalar = kDecay == ops::DecayKind::scalar;
        output ? launch(intra_kernel<Kd, kScalar, true>, intra_shared_bytes<Kd, true>(value_blocks, p.plain))
               : launch(intra_kernel<Kd, kScalar, false>, intra_shared_bytes<Kd, false>(value_blocks, p.plain));
      }
    });
  });
}

}  // namespace linea::cuda::delta::bf16path
