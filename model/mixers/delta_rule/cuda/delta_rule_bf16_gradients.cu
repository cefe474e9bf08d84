// gradients: every input gradient of one chunk of one head (one block of 8 warps each) for the bf16
// pipeline (model/mixers/delta_rule/cuda/delta_rule_bf16.cuh), written once, from what the passes stored: h = S0
// (the state entering the chunk), dh = dS (∂L/∂ the state at its end), Ũ, dŨ (complete) and T.
//
// With X = β ⊙ V and Y = βγ ⊙ K, U = T X and W = T Y, so Ũ = U − W S0 = T (X − Y S0): T, X and Y
// reach the loss through Ũ alone (and X − Y S0 = (I + A) Ũ). Hence, with dX = Tᵀ dŨ,
//   ∂L/∂X = dX,   ∂L/∂Y = −dX S0ᵀ,   ∂L/∂A = −Tᵀ dŨ ((I + A) Ũ)ᵀ Tᵀ = −dX Ũᵀ   (strictly lower part).
// Then, e_ij = exp(G_i − G_j):
//   1. over the value columns, 64 at a time:  dX = Tᵀ dŨ (dv = β ⊙ dX, dβ_v = Σ_e dX v),
//        dQ̂ = dO S0ᵀ,  dK̂ = Ũ dSᵀ,  dY = −dX S0ᵀ,  dP = dO Ũᵀ,  dA = −dX Ũᵀ   (accumulated)
//   2. dÃ = dA ⊙ e (i > j),  dÃβ = diag(β) dÃ,  dP̃ = scale dP ⊙ e (i > j), δ_i = scale dP_ii
//   3. dq = scale γ ⊙ dQ̂ + dP̃ K + δ ⊙ K
//      dk = exp(G_L − G) ⊙ dK̂ + βγ ⊙ dY + β ⊙ (dÃ K) + [(dÃβ)ᵀ K + dP̃ᵀ Q] + δ ⊙ Q
//      dβ = Σ_d k ⊙ (γ dY + dÃ K) + dβ_v
//   4. (a scalar decay) dG_i = Σ_d (q ⊙ (scale γ ⊙ dQ̂ + dP̃ K))_i − Σ_d (k ⊙ [(dÃβ)ᵀ K + dP̃ᵀ Q])_i
//                            + β_i Σ_d (k ⊙ (γ dY + dÃ K))_i,
//      plus γ_L Σ S0 ⊙ dS at the last row; with r_i = Σ_d (k ⊙ exp(G_L − G) ⊙ dK̂)_i,
//      dg_i = Σ_{s≥i} dG_s + Σ_{s<i} r_s.
// A plain write (Problem::plain: T = I, W = 0, β = 1, Ũ = V) has no X, Y and A: dv = dŨ is
// state_backward's, and only dQ̂, dK̂ and dP remain of step 1 (with V for Ũ), dP̃ and δ of step 2.
// Step 4 is model/mixers/delta_rule/cuda/delta_rule_gradients.cu's dG: each of its terms carries a decay factor
// (the diagonal pairs of P have none; they add and remove the same amount and are left out, which
// is why δ and the bracket are kept apart from the sums), so dG stays accurate however small it
// is. Only steps 1 and 3 involve key columns, column by column: the key columns run in passes of Kt (64 or 128; two
// passes for K = 256), dP, dA, dv and dβ_v in the first only. Warp w takes rows 16 (w % 4).. of every result and the
// columns (w / 4) N/2.. of its N. Tiles (Kt = 128): Q and K (the pass's columns), T, dX, dÃ, dÃβ, dP̃, and two sets of
// value-column tiles (v, dO, Ũ, dŨ [64, 64], S0 and dS [Kt, 64]) so that the next columns load during the current ones'
// products: 200 KB. A plain write keeps Q, K, dP̃ and value tiles without v, in key passes of 64: 104 KB, two blocks a
// multiprocessor. Reads per chunk and head: q, k, v, dO, Ũ, dŨ, h, dh, T, G, β (dO, Ũ, dŨ once more per extra pass;
// a plain write reads no v and no dŨ); writes dq, dk, dv, dβ, dg.
//
// RWKV-6's bonus readout (kBonus: a plain write with a decay per channel, Problem::u; intra's P has
// pairs j < i with exp(R_i − G_j), R_i = G_{i−1}, R_0 = 0, and the diagonal scale Σ_d q_id u_d k_id):
// with dP = dO Vᵀ, δ_i = scale dP_ii and sub_i = scale dP_{i,i−1} (i ≥ 1),
//   dq_i = scale exp(R_i) ⊙ (dO S0ᵀ)_i + Σ_{j<i−1} scale dP_ij k_j ⊙ exp(R_i − G_j) + sub_i k_{i−1} + δ_i u ⊙ k_i
//   dk_j = exp(G_L − G_j) ⊙ (V dSᵀ)_j + Σ_{i>j+1} scale dP_ij q_i ⊙ exp(R_i − G_j) + sub_{j+1} q_{j+1} + δ_j u ⊙ q_j
//   du   = Σ_i δ_i q_i ⊙ k_i, the chunk's part to Workspace::du_parts (summed over the chunks in a fixed
//          order by the caller)
// (the sums over pairs by the channel blocks with a shift of 1, delta_rule_bf16_channel.cuh). In ∂L/∂G
// the query side's q_i ⊙ (dq_i's decayed terms: the first two) belongs to row i − 1 (∂L/∂R_i; none
// for i = 0) and the key side's −k_j ⊙ (dk_j's pair sum) to row j. The pairs (i, i − 1) have decay 1
// and would add and remove the same amount at row i − 1: dP̃ leaves them out and sub enters dq and dk
// alone, outside ∂L/∂G (as δ does after the write; the bonus's δ terms carry no decay at all). The
// query side's part goes to a third f32 tile dGq beside dG and r, and
// dg_i = Σ_{s≥i} (dG_s + dGq_{s+1}) + Σ_{s<i} r_s.
#include "kernels/cuda/check.h"
#include "kernels/cuda/warp_reduce.cuh"
#include "model/mixers/delta_rule/cuda/delta_rule_bf16.cuh"
#include "model/mixers/delta_rule/cuda/delta_rule_bf16_channel.cuh"

namespace linea::cuda::delta::bf16path {

namespace {

// The value-column tiles of one set; a plain write stages no v (Ũ is V) and no dŨ (it is dv, which
// only the delta write's dX reads; its tile stays, as the decay per channel's tiles need the room).
template <int Kt, bool kPlain>
struct ValueTiles {
  static constexpr int kRowTiles = kPlain ? 3 : 4;  // dO, Ũ, dŨ (and v)
  Tile<kBV> dO, Ut, dUt, S0, dS, v;                 // S0 and dS: Kt rows
  static constexpr int kElements = kRowTiles * kC * kBV + 2 * Kt * kBV;
  __device__ explicit ValueTiles(bf16* p)
      : dO{p},
        Ut{p + kC * kBV},
        dUt{p + 2 * kC * kBV},
        S0{p + kRowTiles * kC * kBV},
        dS{p + kRowTiles * kC * kBV + Kt * kBV},
        v{kPlain ? nullptr : p + 3 * kC * kBV} {}
};

// Q, K, dP̃, then (not for a plain write, which has no T, X, Y and A) T, dX, dÃ, dÃβ, then the two
// sets of value tiles.
template <int Kt, bool kPlain>
struct GradientShared {
  static constexpr int kPairTiles = kPlain ? 1 : 5;
  Tile<Kt> Q, K;
  Tile<kC> dP, T, dX, dA, dAb;
  bf16* values;  // two ValueTiles, tiles(b)
  __device__ explicit GradientShared(unsigned char* base)
      : Q{reinterpret_cast<bf16*>(base)},
        K{Q.data + kC * Kt},
        dP{K.data + kC * Kt},
        T{kPlain ? nullptr : dP.data + kC * kC},
        dX{kPlain ? nullptr : dP.data + 2 * kC * kC},
        dA{kPlain ? nullptr : dP.data + 3 * kC * kC},
        dAb{kPlain ? nullptr : dP.data + 4 * kC * kC},
        values{dP.data + kPairTiles * kC * kC} {}
  __device__ ValueTiles<Kt, kPlain> tiles(int b) const {
    return ValueTiles<Kt, kPlain>(values + b * ValueTiles<Kt, kPlain>::kElements);
  }
  static constexpr size_t bytes() {
    return sizeof(bf16) * (2 * kC * Kt + kPairTiles * kC * kC + 2 * ValueTiles<Kt, kPlain>::kElements);
  }
};

// Sums x over the 4 lanes of a fragment row (t = 0..3): every lane gets the row's sum.
__device__ __forceinline__ float row_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// kPlain: Problem::plain, whose kernel fits two blocks a multiprocessor (128 registers a thread).
// kBonus: RWKV-6's readout (Problem::u; a plain write with a decay per channel).
template <int Kt, ops::DecayKind kDecayKind, ops::GateKind kGate, bool kPlain, bool kBonus = false>
__global__ void __launch_bounds__(kThreads, kPlain ? 2 : 1)
    gradients_kernel(Problem p, Workspace ws, const bf16* d_o, Outputs out) {
  constexpr bool kDecay = kDecayKind == ops::DecayKind::scalar, kChannel = kDecayKind == ops::DecayKind::channel;
  constexpr bool kGated = kGate == ops::GateKind::erase_write;
  static_assert(!kBonus || (kPlain && kChannel), "the bonus readout is a plain write with a decay per channel");
  constexpr int kShift = kBonus ? 1 : 0;  // the query side's decay R_i = G_{i − kShift}
  extern __shared__ __align__(128) unsigned char shared[];
  const GradientShared<Kt, kPlain> sm(shared);
  constexpr int kN = Kt / 16;  // column tiles of a warp's part of a [64, Kt] result
  __shared__ float G[kC], beta[kC];
  // A decay per channel: after step 1 the value tiles' place holds the three reach operands (row
  // reach of K, column reaches of x and Q), then G; after the reach products, dG and r [C, Kt]
  // (and with the bonus dGq, the query side's part of ∂L/∂G, before G).
  using DecayTile = channel::DecayTile<Kt, kShift>;
  __shared__ uint32_t steep[channel::kBlocks][Kt / 32];
  __shared__ float state_dot_rows[kChannel ? Kt : 1];
  bf16* const reach_k = sm.values;
  bf16* const reach_x = reach_k + channel::kReachRows * Kt;
  bf16* const reach_q = reach_x + channel::kReachRows * Kt;
  const DecayTile dt{reinterpret_cast<float*>(reach_q + channel::kReachRows * Kt), &steep[0][0]};
  float* const dG_tile = reinterpret_cast<float*>(reach_k);
  float* const r_tile = dG_tile + kC * DecayTile::kPitch;
  float* const dGq_tile = r_tile + kC * DecayTile::kPitch;
  static_assert(3 * kC * DecayTile::kPitch * sizeof(float) <= 3 * channel::kReachRows * Kt * sizeof(bf16),
                "dG, r and dGq fit over the reach operands, before G");
  static_assert(!kChannel || 3 * channel::kReachRows * Kt * sizeof(bf16) + DecayTile::kBytes <=
                                 2 * ValueTiles<Kt, kPlain>::kElements * sizeof(bf16),
                "the channel decay's tiles fit in the value tiles' place");
  enum { kR, kDbA, kDG, kDbV, kSums };
  __shared__ float sums[kSums][2][kC];  // row sums, one per warp column half
  __shared__ float state_dot[kThreads / 32];
  __shared__ float dG_rows[kC], r_rows[kC], diagonal[kC];
  __shared__ float subdiagonal[kBonus ? kC : 1];  // sub_i = scale dP_{i,i−1} (sub_0 = 0)
  const int64_t chunk = blockIdx.x;
  const int head = blockIdx.y, H = p.heads, K = p.key_dim, V = p.value_dim;
  const Span s = chunk_span(p.chunks, chunk);
  const int L = s.len;
  const int64_t state_at = (chunk * H + head) * static_cast<int64_t>(K) * V;
  const int m0 = warp_row0(), half = warp_half(), l = mma::lane_id();
  const int c0 = half * Kt / 2, j0 = 32 * half;  // the warp's columns of [64, Kt] and [64, 64] results
  const int value_tiles = (V + kBV - 1) / kBV, passes = (K + Kt - 1) / Kt;

  // Copies value tile b (columns 64 b..) of the pass at key column k0 into set b % 2; v in the
  // first pass only.
  const auto stage_values = [&](int b, int k0, bool first_pass) {
    const ValueTiles<Kt, kPlain> t = sm.tiles(b & 1);
    const int e0 = b * kBV;
    if (first_pass && !kPlain) stage_rows(t.v, p.v, s, H, head, V, e0);
    stage_rows(t.dO, d_o, s, H, head, V, e0);
    stage_rows(t.Ut, ws.Ut, s, H, head, V, e0);
    if constexpr (!kPlain) stage_rows(t.dUt, ws.dUt, s, H, head, V, e0);
    stage_matrix(t.S0, ws.h + state_at + int64_t{k0} * V, Kt, K - k0, V, V, e0);
    stage_matrix(t.dS, ws.dh + state_at + int64_t{k0} * V, Kt, K - k0, V, V, e0);
  };
  if constexpr (!kPlain) stage_matrix(sm.T, ws.T + (chunk * H + head) * kC * kC, kC, kC, kC, kC, 0);
  if (threadIdx.x < kC) {
    const int i = threadIdx.x;
    beta[i] = kGated || kPlain ? 1.0f : i < L ? __bfloat162float(p.beta[(s.first + i) * H + head]) : 0.0f;
    G[i] = kDecay && i < L ? ws.G[(s.first + i) * H + head] : 0.0f;
    if (kBonus && i == 0) subdiagonal[0] = 0.0f;
  }
  // e_ij (j ≤ i < L: exponent ≤ 0) and γ_i.
  const auto pair_decay = [&](int i, int j) { return kDecay ? expf(G[i] - G[j]) : 1.0f; };
  const auto gamma = [&](int i) { return kDecay ? expf(G[i]) : 1.0f; };

  float r[2] = {}, dbA[2] = {}, dG[2] = {}, dbv[2] = {}, dot = 0.0f;  // the thread's rows m0 + g, m0 + g + 8
  for (int pass = 0; pass < passes; ++pass) {
    const int k0 = pass * Kt;
    const bool first = pass == 0;
    if (!first) __syncthreads();  // the previous pass is done with Q, K and the value tiles
    stage_rows(sm.Q, p.q, s, H, head, K, k0);
    stage_rows(sm.K, p.k, s, H, head, K, k0);
    stage_values(0, k0, first);
    mma::commit_copies();
    // b_id (GDN-2) or β_i, and x = k or b ⊙ k, at key column k0 + d.
    const auto erase = [&](int i, int d) {
      if constexpr (kGated) {
        return i < L && k0 + d < K ? __bfloat162float(p.b[((s.first + i) * H + head) * K + k0 + d]) : 0.0f;
      } else {
        return beta[i];
      }
    };
    const auto x_entry = [&](int i, int d) { return kGated ? entry(sm.K, i, d) * erase(i, d) : entry(sm.K, i, d); };

    // 1.
    float row_dot = 0.0f;  // a decay per channel: Σ_e S0_de dS_de of the thread's row (below)
    float dQ[kN][4] = {}, dK[kN][4] = {}, dY[kN][4] = {}, dP[4][4] = {}, dA[4][4] = {};
    for (int b = 0; b < value_tiles; ++b) {
      const ValueTiles<Kt, kPlain> t = sm.tiles(b & 1);
      const int e0 = b * kBV;
      mma::wait_copies<0>();
      __syncthreads();
      if (b + 1 < value_tiles) stage_values(b + 1, k0, first);
      mma::commit_copies();
      if constexpr (!kPlain) {
        float dX[4][4] = {};
        mma::product<mma::Hold::transposed, mma::Hold::as_is>(dX, sm.T, m0, t.dUt, j0, kC);
#pragma unroll
        for (int n = 0; n < 4; ++n) {
          mma::for_pairs(dX[n], m0, j0 + 8 * n, [&](int i, int e, float x0, float x1) {
            put(sm.dX, i, e, x0, x1);
            if (first && i < L && e0 + e < V) {
              const int64_t row = (s.first + i) * H + head;
              if constexpr (kGated) {
                const float2 w = mma::unpack(*reinterpret_cast<const uint32_t*>(p.w + row * V + e0 + e));
                const float2 v = get(t.v, i, e);
                put_global(out.dv, row, V, e0 + e, w.x * x0, w.y * x1);
                put_global(out.dw, row, V, e0 + e, v.x * x0, v.y * x1);
              } else {
                put_global(out.dv, row, V, e0 + e, beta[i] * x0, beta[i] * x1);
              }
            }
          });
          if (first && !kGated) {
            mma::for_entries(m0, j0 + 8 * n,
                             [&](int i, int e, int q) { dbv[q >> 1] += dX[n][q] * __bfloat162float(*t.v.at(i, e)); });
          }
        }
      }
      __syncthreads();  // dX complete
#pragma unroll 1
      for (int k = 0; k < kBV; k += 16) {
        uint32_t ado[4], au[4], adx[4];
        mma::a_mk(ado, t.dO, m0, k);
        mma::a_mk(au, t.Ut, m0, k);
        if constexpr (!kPlain) mma::a_mk(adx, sm.dX, m0, k);
#pragma unroll
        for (int j = 0; j < kN; j += 2) {
          uint32_t bs0[2][2], bds[2][2];
          mma::b_nk(bs0, t.S0, k, c0 + 8 * j);
          mma::b_nk(bds, t.dS, k, c0 + 8 * j);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            mma::mma(dQ[j + h], ado, bs0[h]);
            if constexpr (!kPlain) mma::mma(dY[j + h], adx, bs0[h]);
            mma::mma(dK[j + h], au, bds[h]);
          }
        }
        if (first) {
#pragma unroll
          for (int j = 0; j < 4; j += 2) {
            uint32_t bu[2][2];
            mma::b_nk(bu, t.Ut, k, j0 + 8 * j);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              mma::mma(dP[j + h], ado, bu[h]);
              if constexpr (!kPlain) mma::mma(dA[j + h], adx, bu[h]);
            }
          }
        }
      }
      if constexpr (kDecay) {
        for (int q = threadIdx.x; q < Kt * kBV / 2; q += blockDim.x) {
          const int d = q / (kBV / 2), e = 2 * (q % (kBV / 2));
          const float2 a = get(t.S0, d, e), c = get(t.dS, d, e);
          dot += a.x * c.x + a.y * c.y;
        }
      }
      if constexpr (kChannel) {  // thread t: row t / kPerRow, kSpan columns
        constexpr int kPerRow = kThreads / Kt, kSpan = kBV / kPerRow;
        const int d = threadIdx.x / kPerRow, e_first = kSpan * (threadIdx.x % kPerRow);
        for (int e = e_first; e < e_first + kSpan; e += 2) {
          const float2 a = get(t.S0, d, e), c = get(t.dS, d, e);
          row_dot += a.x * c.x + a.y * c.y;
        }
      }
    }
    if constexpr (kChannel) {
      constexpr int kPerRow = kThreads / Kt;
      for (int o = 1; o < kPerRow; o <<= 1) row_dot += __shfl_xor_sync(0xffffffffu, row_dot, o);
      __syncthreads();  // the value tiles are read: G and the reach operands go over them
      if (threadIdx.x % kPerRow == 0) state_dot_rows[threadIdx.x / kPerRow] = row_dot;
      dt.load(p.g, s, H, head, K, k0, nullptr);
    }

    // 2.
    if (first) {
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        if constexpr (!kPlain) {
          mma::for_pairs(dA[n], m0, j0 + 8 * n, [&](int i, int j, float x0, float x1) {
            const float a0 = i > j && i < L ? -x0 * pair_decay(i, j) : 0.0f;
            const float a1 = i > j + 1 && i < L ? -x1 * pair_decay(i, j + 1) : 0.0f;
            put(sm.dA, i, j, a0, a1);
            put(sm.dAb, i, j, beta[i] * a0, beta[i] * a1);
          });
        }
        mma::for_pairs(dP[n], m0, j0 + 8 * n, [&](int i, int j, float x0, float x1) {
          // dP̃: the pairs j < i (with the bonus j < i − 1: the subdiagonal is kept apart)
          const float p0 = j < i - kShift && i < L ? p.scale * x0 * pair_decay(i, j) : 0.0f;
          const float p1 = j + 1 < i - kShift && i < L ? p.scale * x1 * pair_decay(i, j + 1) : 0.0f;
          put(sm.dP, i, j, p0, p1);
          if (j == i) diagonal[i] = p.scale * x0;
          if (j + 1 == i) diagonal[i] = p.scale * x1;
          if constexpr (kBonus) {
            if (j == i - 1) subdiagonal[i] = p.scale * x0;
            if (j + 1 == i - 1) subdiagonal[i] = p.scale * x1;
          }
        });
      }
    }

    if constexpr (!kChannel) {
      // 3. The first terms, and the row sums that need dK̂ and dY before they are overwritten.
      const float G_last = kDecay ? G[L - 1] : 0.0f;
#pragma unroll
      for (int n = 0; n < kN; ++n) {
        mma::for_entries(m0, c0 + 8 * n, [&](int i, int d, int q) {
          const float k = __bfloat162float(*sm.K.at(i, d)), dy = -dY[n][q];
          const float to_end = kDecay && i < L ? expf(G_last - G[i]) : 1.0f, g = gamma(i);
          dQ[n][q] *= p.scale * g;
          r[q >> 1] += k * to_end * dK[n][q];
          dbA[q >> 1] += k * g * dy;
          dK[n][q] = to_end * dK[n][q] + beta[i] * g * dy;
          dY[n][q] = 0.0f;  // from here on: dÃ K
        });
      }
      __syncthreads();  // dÃ, dÃβ, dP̃ complete
      float(&dek)[kN][4] = dY;
      float col[kN][4] = {};  // (dÃβ)ᵀ K + dP̃ᵀ Q
#pragma unroll 1
      for (int k = 0; k < kC; k += 16) {
        uint32_t ap[4], aa[4], aab[4], apt[4];
        mma::a_mk(ap, sm.dP, m0, k);
        if constexpr (!kPlain) {
          mma::a_mk(aa, sm.dA, m0, k);
          mma::a_km(aab, sm.dAb, m0, k);
        }
        mma::a_km(apt, sm.dP, m0, k);
#pragma unroll
        for (int j = 0; j < kN; j += 2) {
          uint32_t bk[2][2], bq[2][2];
          mma::b_kn(bk, sm.K, k, c0 + 8 * j);
          mma::b_kn(bq, sm.Q, k, c0 + 8 * j);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            mma::mma(dQ[j + h], ap, bk[h]);
            if constexpr (!kPlain) {
              mma::mma(dek[j + h], aa, bk[h]);
              mma::mma(col[j + h], aab, bk[h]);
            }
            mma::mma(col[j + h], apt, bq[h]);
          }
        }
      }
#pragma unroll
      for (int n = 0; n < kN; ++n) {
        mma::for_entries(m0, c0 + 8 * n, [&](int i, int d, int q) {
          const float k = __bfloat162float(*sm.K.at(i, d)), qv = __bfloat162float(*sm.Q.at(i, d));
          dbA[q >> 1] += k * dek[n][q];
          dG[q >> 1] += qv * dQ[n][q] - k * col[n][q];
          dK[n][q] += beta[i] * dek[n][q] + col[n][q] + diagonal[i] * qv;
          dQ[n][q] += diagonal[i] * k;
        });
        mma::for_pairs(dQ[n], m0, c0 + 8 * n, [&](int i, int d, float x0, float x1) {
          if (i < L && k0 + d < K) put_global(out.dq, (s.first + i) * H + head, K, k0 + d, x0, x1);
        });
        mma::for_pairs(dK[n], m0, c0 + 8 * n, [&](int i, int d, float x0, float x1) {
          if (i < L && k0 + d < K) put_global(out.dk, (s.first + i) * H + head, K, k0 + d, x0, x1);
        });
      }
    } else {
      // 3 with a decay per channel: the sums over pairs by blocks of 16 rows
      // (delta_rule_bf16_channel.cuh), every dG and r entry kept for the per-channel dg.
      const int block = warp_index() & 3;
      __syncthreads();  // G, dÃ, dÃβ and dP̃
      channel::fill_row_reach<Kt>(reach_k, dt, [&](int j, int d) { return entry(sm.K, j, d); });
      if constexpr (!kPlain) channel::fill_column_reach<Kt>(reach_x, dt, x_entry);
      channel::fill_column_reach<Kt>(reach_q, dt, [&](int m, int d) { return entry(sm.Q, m, d); });
      float r_e[kN][4], db_e[kN][4];
#pragma unroll
      for (int n = 0; n < kN; ++n) {
        mma::for_entries(m0, c0 + 8 * n, [&](int i, int d, int q) {
          const float k = entry(sm.K, i, d), dy = -dY[n][q];
          const float g = expf(dt.at(i, d)), to_end = expf(dt.at(kC - 1, d) - dt.at(i, d));
          dQ[n][q] *= p.scale * (kBonus ? expf(dt.readout(i, d)) : g);  // scale exp(R_i)
          r_e[n][q] = k * to_end * dK[n][q];
          db_e[n][q] = k * g * dy;
          dK[n][q] = to_end * dK[n][q] + erase(i, d) * g * dy;
          dY[n][q] = 0.0f;  // from here on: the row sums of dÃ
        });
      }
      __syncthreads();  // the reach operands
      float(&dek)[kN][4] = dY;
      float prow[kN][4] = {}, col[kN][4] = {};  // Σ_{j<i} dP̃_ij k_j e_ij; the column sums of dÃ and dP̃
      const Tile<Kt> rows_k = channel::row_reach<Kt>(reach_k, block);
      const int rows = channel::kBlock * (block + 1), from = channel::kBlock * block;
      if constexpr (!kPlain) {
        mma::product<mma::Hold::as_is, mma::Hold::as_is>(dek, sm.dA, m0, rows_k, c0, rows);
        mma::product<mma::Hold::transposed, mma::Hold::as_is>(
            col, kGated ? sm.dA : sm.dAb, m0, channel::column_reach<Kt>(reach_x, block), c0, kC - from, from);
      }
      mma::product<mma::Hold::as_is, mma::Hold::as_is>(prow, sm.dP, m0, rows_k, c0, rows);
      mma::product<mma::Hold::transposed, mma::Hold::as_is>(col, sm.dP, m0, channel::column_reach<Kt>(reach_q, block),
                                                            c0, kC - from, from);
      __syncthreads();  // the reach operands are read: dG and r go over them
      const Tile<kC>& dAx = kGated ? sm.dA : sm.dAb;
#pragma unroll
      for (int n = 0; n < kN; ++n) {
        mma::for_entries(m0, c0 + 8 * n, [&](int i, int d, int q) {
          float row_k = dek[n][q] * channel::row_near(dt, i, d), row_p = prow[n][q] * channel::row_near(dt, i, d);
          float column = col[n][q] * channel::column_near(dt, i, d);
          if (dt.is_steep(block, d)) {  // the pairs inside the block one by one (those of dP̃)
            const int first_row = i - i % channel::kBlock;
            for (int j = first_row; j < i - kShift; ++j) {
              const float kf = entry(sm.K, j, d) * expf(dt.readout(i, d) - dt.at(j, d));
              if constexpr (!kPlain) row_k += entry(sm.dA, i, j) * kf;
              row_p += entry(sm.dP, i, j) * kf;
            }
            for (int m = i + 1 + kShift; m < first_row + channel::kBlock; ++m) {
              const float written = kPlain ? 0.0f : entry(dAx, m, i) * x_entry(m, d);
              column += (written + entry(sm.dP, m, i) * entry(sm.Q, m, d)) * expf(dt.readout(m, d) - dt.at(i, d));
            }
          }
          const float k = entry(sm.K, i, d), qv = entry(sm.Q, i, d), b = erase(i, d);
          const float dq = dQ[n][q] + row_p;  // dq's decayed terms
          db_e[n][q] += k * row_k;
          float dG_e;
          if constexpr (kBonus) {  // dq's decayed terms belong to row i − 1 (dGq)
            dG_e = b * db_e[n][q] - k * column;
            if (i == L - 1) dG_e += expf(dt.at(i, d)) * state_dot_rows[d];
            const float u = k0 + d < K ? p.u[static_cast<int64_t>(head) * K + k0 + d] : 0.0f;
            const float below = i + 1 < kC ? subdiagonal[i + 1] * entry(sm.Q, i + 1, d) : 0.0f;
            const float above = i > 0 ? subdiagonal[i] * entry(sm.K, i - 1, d) : 0.0f;
            dK[n][q] += b * row_k + column + diagonal[i] * u * qv + below;
            dQ[n][q] = dq + diagonal[i] * u * k + above;
            dGq_tile[i * DecayTile::kPitch + d] = i < L ? qv * dq : 0.0f;
          } else {
            dG_e = qv * dq + b * db_e[n][q] - k * column;
            if (i == L - 1) dG_e += expf(dt.at(i, d)) * state_dot_rows[d];
            dK[n][q] += b * row_k + column + diagonal[i] * qv;
            dQ[n][q] = dq + diagonal[i] * k;
          }
          if constexpr (!kGated) dbA[q >> 1] += db_e[n][q];
          dG_tile[i * DecayTile::kPitch + d] = i < L ? dG_e : 0.0f;
          r_tile[i * DecayTile::kPitch + d] = i < L ? r_e[n][q] : 0.0f;
        });
        mma::for_pairs(dQ[n], m0, c0 + 8 * n, [&](int i, int d, float x0, float x1) {
          if (i < L && k0 + d < K) put_global(out.dq, (s.first + i) * H + head, K, k0 + d, x0, x1);
        });
        mma::for_pairs(dK[n], m0, c0 + 8 * n, [&](int i, int d, float x0, float x1) {
          if (i < L && k0 + d < K) put_global(out.dk, (s.first + i) * H + head, K, k0 + d, x0, x1);
        });
        if constexpr (kGated) {
          mma::for_pairs(db_e[n], m0, c0 + 8 * n, [&](int i, int d, float x0, float x1) {
            if (i < L && k0 + d < K) put_global(out.db, (s.first + i) * H + head, K, k0 + d, x0, x1);
          });
        }
      }
      __syncthreads();
      // dg_id = Σ_{s≥i} dG_sd + Σ_{s<i} r_sd (with the bonus + Σ_{s>i} dGq_sd), a thread per
      // channel; with the bonus also the chunk's du_d = Σ_i δ_i q_id k_id.
      if (threadIdx.x < Kt && k0 + static_cast<int>(threadIdx.x) < K) {
        const int d = threadIdx.x;
        float before = 0.0f;
        for (int i = 0; i < L; ++i) {
          const float x = r_tile[i * DecayTile::kPitch + d];
          r_tile[i * DecayTile::kPitch + d] = before;
          before += x;
        }
        float after = 0.0f;
        for (int i = L - 1; i >= 0; --i) {
          after += dG_tile[i * DecayTile::kPitch + d];
          out.dg[((s.first + i) * H + head) * K + k0 + d] = after + r_tile[i * DecayTile::kPitch + d];
          if constexpr (kBonus) after += dGq_tile[i * DecayTile::kPitch + d];  // for the rows before i
        }
        if constexpr (kBonus) {
          float du = 0.0f;
          for (int i = 0; i < L; ++i) du += diagonal[i] * entry(sm.Q, i, d) * entry(sm.K, i, d);
          ws.du_parts[(chunk * H + head) * static_cast<int64_t>(K) + k0 + d] = du;
        }
      }
    }
  }

  // 4. Row sums: over the 4 lanes of a row, then the two column halves in order.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float x[kSums] = {row_sum(r[h]), row_sum(dbA[h]), row_sum(dG[h]), row_sum(dbv[h])};
    if ((l & 3) == 0) {
      for (int q = 0; q < kSums; ++q) sums[q][half][m0 + (l >> 2) + 8 * h] = x[q];
    }
  }
  if constexpr (kDecay) {
    dot = warp_sum(dot);
    if (l == 0) state_dot[warp_index()] = dot;
  }
  __syncthreads();
  if (threadIdx.x < kC) {
    const int i = threadIdx.x;
    const auto total = [&](int q) { return sums[q][0][i] + sums[q][1][i]; };
    const float dbA_i = total(kDbA);
    if (!kGated && !kPlain && i < L) out.dbeta[(s.first + i) * H + head] = __float2bfloat16_rn(dbA_i + total(kDbV));
    if constexpr (kDecay) {
      float dG_i = total(kDG) + beta[i] * dbA_i;
      if (i == L - 1) {
        float all = 0.0f;
        for (int w = 0; w < kThreads / 32; ++w) all += state_dot[w];
        dG_i += gamma(i) * all;
      }
      dG_rows[i] = i < L ? dG_i : 0.0f;
      r_rows[i] = i < L ? total(kR) : 0.0f;
    }
  }
  if constexpr (kDecay) {
    __syncthreads();
    if (threadIdx.x < L && out.dg) {
      const int i = threadIdx.x;
      float dg = 0.0f;
      for (int q = 0; q < i; ++q) dg += r_rows[q];
      for (int q = i; q < L; ++q) dg += dG_rows[q];
      out.dg[(s.first + i) * H + head] = dg;
    }
  }
}

template <int Kt, ops::DecayKind kDecay, ops::GateKind kGate, bool kPlain, bool kBonus = false>
void launch(const Problem& p, const Workspace& ws, const bf16* d_o, const Outputs& out) {
  const auto kernel = gradients_kernel<Kt, kDecay, kGate, kPlain, kBonus>;
  constexpr size_t bytes = GradientShared<Kt, kPlain>::bytes();
  allow_shared_memory(reinterpret_cast<const void*>(kernel), bytes);
  const dim3 grid(static_cast<unsigned>(p.chunks.count), static_cast<unsigned>(p.heads));
  kernel<<<grid, kThreads, bytes>>>(p, ws, d_o, out);
  check_launch("delta_rule bf16 gradients_kernel");
}

}  // namespace

void gradients(const Problem& p, const Workspace& ws, const bf16* d_o, const Outputs& out) {
  if (p.chunks.count == 0) return;
  dispatch_kinds(p.decay, p.gate, [&](auto decay, auto gate) {
    constexpr ops::DecayKind kDecay = decltype(decay)::value;
    constexpr ops::GateKind kGate = decltype(gate)::value;
    if constexpr (kGate == ops::GateKind::beta) {
      if constexpr (kDecay == ops::DecayKind::channel) {
        if (p.u) return launch<64, kDecay, kGate, true, true>(p, ws, d_o, out);  // the bonus readout (plain)
      }
      if (p.plain) return launch<64, kDecay, kGate, true>(p, ws, d_o, out);  // key passes of 64: 104 KB
    }
    if constexpr (kDecay == ops::DecayKind::channel) {  // key passes of 64 (the channel tiles fit)
      launch<64, kDecay, kGate, false>(p, ws, d_o, out);
    } else {
      p.key_dim <= 64 ? launch<64, kDecay, kGate, false>(p, ws, d_o, out)
                      : launch<128, kDecay, kGate, false>(p, ws, d_o, out);
    }
  });
}

}  // namespace linea::cuda::delta::bf16path
