// Causal softmax attention on CUDA (contract: model/mixers/attention/attention.h and cuda/attention.h; the
// readable reference: model/mixers/attention/cpu/attention.cpp). Per query t and query head h (kv head
// g = h / (Hq/Hkv)), over the keys s that t sees (s ≤ t in t's sequence, t − s < window):
//   z_ts = scale · q_t·k_s,   lse_t = log Σ_s exp(z_ts),   P_ts = exp(z_ts − lse_t),   o_t = Σ_s P_ts v_s
// Backward, with D_t = Σ_d dout_td · o_td precomputed:
//   dP_ts = dout_t·v_s,   dS_ts = P_ts (dP_ts − D_t)
//   dq_t = scale Σ_s dS_ts k_s,   dk_s = scale Σ_{t, h of g} dS_ts q_t,   dv_s = Σ_{t, h of g} P_ts dout_t
//
// Work comes in tiles of consecutive tokens of one sequence (a host-made list, heaviest first so
// that the long causal rows start early); a tile never crosses a sequence boundary.
//
// bf16: flash kernels on mma.sync m16n8k16 (bf16 operands, f32 accumulators), 4 warps per block,
// operands staged in shared memory (rows padded by 8 elements: ldmatrix without bank conflicts)
// by cp.async, double-buffered so that the next step's rows load while this step computes.
// - forward: a block per (query tile, head) walks the keys its queries see, a step of keys at a
//   time, from the first key of its first query to its last query, so fully masked steps are
//   never visited; the mask is evaluated only on steps that it cuts. A warp owns 32 queries (two
//   mma row tiles sharing every K/V fragment it reads). Online softmax in base 2
//   (z' = z·log2 e): m = running row max, l = running Σ exp2(z' − m), O rescaled by
//   exp2(m_old − m_new) when m grows; lse = (m + log2 l) · ln 2.
// - backward: P is recomputed from lse. A block per (key tile, kv head) holds dK, dV of its keys
//   in registers over the query heads of the group and the query steps (kBackwardStep queries)
//   that see its keys: dV += Pᵀ dO, dK += dSᵀ Q. A second kernel, a block per (query tile, head),
//   accumulates dQ += dS K over the key steps (S and dP computed again: no atomics, no partial
//   sums). Every output row is written by one warp after sums in a fixed order: deterministic.
// f32 (for the tests): one warp per row, lanes splitting the head dim, the same sums key by key in
// exact f32 arithmetic.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/chunk/cuda/mma_bf16.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/element_types.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/warp_reduce.cuh"
#include "model/mixers/attention/cuda/attention.h"

namespace linea::cuda {

namespace {

using bf16_t = __nv_bfloat16;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kMmaRows = 16;  // the rows of one mma
// Forward and dQ: a warp owns kQueryMmas mma row tiles of queries (every K/V fragment read from
// shared memory feeds that many mmas), a block kQueryTile queries. Keys go in steps of
// kForwardKeyStep (forward) and kQueryGradientKeyStep (dQ: its S, dP and dQ accumulators share the
// registers).
constexpr int kQueryMmas = 2;
constexpr int kQueryWarpRows = kQueryMmas * kMmaRows;
constexpr int kQueryTile = kWarps * kQueryWarpRows;
constexpr int kForwardKeyStep = 64;
constexpr int kQueryGradientKeyStep = 32;
// dK, dV: a warp owns one mma row tile of keys (its dK and dV accumulators fill the registers), a
// block kKeyTile keys; queries go in steps of kBackwardStep.
constexpr int kKeyTile = kWarps * kMmaRows;
constexpr int kBackwardStep = 32;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Tokens [begin, end) of the sequence [seq_begin, seq_end).
struct Tile {
  int32_t begin, end, seq_begin, seq_end;
};

struct Dims {
  int q_heads, kv_heads, group, window;  // window 0 = unlimited
  float scale, scale_log2;
};

// The keys query t sees are [first_key(t), t]; the queries that see key s are [s, last_query(s)].
__host__ __device__ inline int first_key(int t, int seq_begin, int window) {
  return window > 0 && t - window + 1 > seq_begin ? t - window + 1 : seq_begin;
}
__host__ __device__ inline int last_query(int s, int seq_end, int window) {
  return window > 0 && s + window - 1 < seq_end - 1 ? s + window - 1 : seq_end - 1;
}
// Whether query t sees key s, for s, t of one tile's sequence (t < seq_end).
__device__ inline bool sees(int t, int s, int seq_begin, int window) {
  return s <= t && s >= seq_begin && (window == 0 || t - s < window);
}

// Row `token` of head `head` in a [N, heads·D] tensor.
template <int D, class T>
__device__ inline T* head_row(T* base, int token, int heads, int head) {
  return base + (int64_t{token} * heads + head) * D;
}

// ---- tensor-core primitives: kernels/chunk/cuda/mma_bf16.cuh (mma.sync m16n8k16, ldmatrix, cp.async)
// Row and column of accumulator entry c of n-tile nt in a warp's 16 × 8·NT result.
__device__ __forceinline__ int fragment_row(int c) { return (threadIdx.x % kWarpSize) / 4 + (c / 2) * 8; }
__device__ __forceinline__ int fragment_col(int nt, int c) { return nt * 8 + (threadIdx.x % 4) * 2 + c % 2; }

// Shared-memory tiles are row-major [rows][D] with rows padded to D + 8 elements.
template <int D>
inline constexpr int kStride = D + 8;
template <int D, int Rows>
inline constexpr int kTileElements = kStride<D>* Rows;

// Starts copying rows first..first+Rows−1 of head `head` of a [N, heads·D] tensor into `tile`;
// rows at or past `end` become zeros.
template <int D, int Rows>
__device__ void load_rows(bf16_t* tile, const bf16_t* base, int heads, int head, int first, int end) {
  constexpr int kChunks = D / 8;  // 16-byte pieces per row
  for (int i = threadIdx.x; i < Rows * kChunks; i += kThreads) {
    const int r = i / kChunks, c = (i % kChunks) * 8;
    const bool valid = first + r < end;
    mma::copy16(tile + r * kStride<D> + c, valid ? head_row<D>(base, first + r, heads, head) + c : base, valid);
  }
}

// acc[16·MT × 8·NT] += A · Bᵀ: A = the 16·MT rows at `a`, B = the 8·NT rows at `b` (shared tiles;
// the contraction runs over the D columns of both). acc[mt] is the mma row tile mt.
template <int D, int MT, int NT>
__device__ void mma_rows_by_rows(float (&acc)[MT][NT][4], const bf16_t* a, const bf16_t* b) {
  static_assert(NT % 2 == 0, "n-tiles go in pairs");
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t af[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      mma::ldsm_x4(af[mt], a + (mt * kMmaRows + lane % 16) * kStride<D> + kk * 16 + (lane / 16) * 8);
    }
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      uint32_t bf[4];
      mma::ldsm_x4(bf, b + (np * 16 + lane % 8 + (lane / 16) * 8) * kStride<D> + kk * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma::mma(acc[mt][2 * np], af[mt], bf[0], bf[1]);
        mma::mma(acc[mt][2 * np + 1], af[mt], bf[2], bf[3]);
      }
    }
  }
}

// acc[16·MT × D] += W · B: W [16·MT × K] in accumulator layout (rounded to bf16 here), B = the K
// rows at `b` (a shared tile; the contraction runs over its rows).
template <int D, int MT, int K>
__device__ void mma_weights_by_rows(float (&acc)[MT][D / 8][4], const float (&w)[MT][K / 8][4], const bf16_t* b) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    uint32_t af[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      af[mt][0] = mma::pack(w[mt][2 * kk][0], w[mt][2 * kk][1]);
      af[mt][1] = mma::pack(w[mt][2 * kk][2], w[mt][2 * kk][3]);
      af[mt][2] = mma::pack(w[mt][2 * kk + 1][0], w[mt][2 * kk + 1][1]);
      af[mt][3] = mma::pack(w[mt][2 * kk + 1][2], w[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int np = 0; np < D / 16; ++np) {
      uint32_t bf[4];
      mma::ldsm_x4_trans(bf, b + (kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * kStride<D> + np * 16 + (lane / 16) * 8);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma::mma(acc[mt][2 * np], af[mt], bf[0], bf[1]);
        mma::mma(acc[mt][2 * np + 1], af[mt], bf[2], bf[3]);
      }
    }
  }
}

// Writes factor[mt][row half] · acc (16·MT rows × D from token `first`) to head `head`, rows below
// `end`.
template <int D, int MT>
__device__ void store_rows(bf16_t* base, int heads, int head, int first, int end, const float (&acc)[MT][D / 8][4],
                           const float (&factor)[MT][2]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int token = first + mt * kMmaRows + fragment_row(2 * half);
      if (token >= end) continue;
      bf16_t* row = head_row<D>(base, token, heads, head);
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt) {
        *reinterpret_cast<__nv_bfloat162*>(row + fragment_col(nt, 0)) = __floats2bfloat162_rn(
            acc[mt][nt][2 * half] * factor[mt][half], acc[mt][nt][2 * half + 1] * factor[mt][half]);
      }
    }
  }
}

// Runs body(step, buffer) for step = 0 … steps − 1 while load(step + 1, the other buffer) is in
// flight; the caller has issued load(0, 0) (and whatever else step 0 needs) before.
template <class Load, class Body>
__device__ void pipelined(int steps, Load&& load, Body&& body) {
  mma::commit_copies();
  for (int step = 0; step < steps; ++step) {
    if (step + 1 < steps) {
      load(step + 1, (step + 1) % 2);
      mma::commit_copies();
      mma::wait_copies<1>();
    } else {
      mma::wait_copies<0>();
    }
    __syncthreads();
    body(step, step % 2);
    __syncthreads();
  }
}

// The key steps of a query tile: from its first query's first key to its last query.
struct KeyRange {
  int begin, steps;
};
__device__ inline KeyRange key_range(const Tile& tile, int window, int step) {
  const int begin = first_key(tile.begin, tile.seq_begin, window);
  return {begin, (tile.end - begin + step - 1) / step};
}

// Whether a warp's queries [t0, t_last] (up to kQueryWarpRows) see all of keys [s0, s0 + keys) (no
// mask needed) or none (nothing to do).
struct Coverage {
  bool all, any;
};
__device__ inline Coverage query_rows_cover(int t0, int t_last, int s0, int keys, const Tile& tile, int window) {
  return {t_last == t0 + kQueryWarpRows - 1 && s0 + keys - 1 <= t0 && s0 >= tile.seq_begin &&
              (window == 0 || t_last - s0 < window),
          t0 <= t_last && s0 <= t_last && s0 + keys - 1 >= first_key(t0, tile.seq_begin, window)};
}

// What a block of the forward or the dQ kernel works on: query tile blockIdx.x / Hq of `tiles`,
// query head h = blockIdx.x % Hq (kv head g), the warp's queries t0..t_last (none when t_last < t0),
// and the key steps of kStep keys it walks, whose K and V rows load into a double buffer at skv in
// shared memory (buffer b: K at 2b, V at 2b + 1).
template <int D, int kStep>
struct QueryTileBlock {
  static constexpr int kKeyElements = kTileElements<D, kStep>;
  int h, g;
  Tile tile;
  int warp, t0, t_last;
  KeyRange keys;
  bf16_t* skv;
  __device__ QueryTileBlock(const Tile* tiles, const Dims& dims, bf16_t* skv)
      : h(blockIdx.x % dims.q_heads),
        g(h / dims.group),
        tile(tiles[blockIdx.x / dims.q_heads]),
        warp(threadIdx.x / kWarpSize),
        t0(tile.begin + warp * kQueryWarpRows),
        t_last(min(t0 + kQueryWarpRows, tile.end) - 1),
        keys(key_range(tile, dims.window, kStep)),
        skv(skv) {}
  // Starts copying the tile's rows of head h of a [N, Hq·D] tensor (Q, dO) into `to`.
  __device__ void load_queries(bf16_t* to, const bf16_t* from, const Dims& dims) const {
    load_rows<D, kQueryTile>(to, from, dims.q_heads, h, tile.begin, tile.end);
  }
  // Starts copying key step `step` of K and V (kv head g) into buffer `buffer`.
  __device__ void load_keys(const bf16_t* k, const bf16_t* v, const Dims& dims, int step, int buffer) const {
    bf16_t* kbuf = key_buffer(buffer);
    load_rows<D, kStep>(kbuf, k, dims.kv_heads, g, keys.begin + step * kStep, tile.end);
    load_rows<D, kStep>(kbuf + kKeyElements, v, dims.kv_heads, g, keys.begin + step * kStep, tile.end);
  }
  // K of buffer `buffer`; its V follows at + kKeyElements.
  __device__ bf16_t* key_buffer(int buffer) const { return skv + buffer * 2 * kKeyElements; }
};

// ---- bf16 forward ------------------------------------------------------------------------------
template <int D>
constexpr size_t forward_shared_bytes() {  // Q, then (K, V) × 2 buffers
  return sizeof(bf16_t) * (kTileElements<D, kQueryTile> + 4 * kTileElements<D, kForwardKeyStep>);
}

template <int D>
__global__ void __launch_bounds__(kThreads) forward_kernel(bf16_t* out, float* lse, const bf16_t* q, const bf16_t* k,
                                                           const bf16_t* v, const Tile* tiles, Dims dims) {
  extern __shared__ __align__(16) unsigned char shared[];
  constexpr int MT = kQueryMmas, kStep = kForwardKeyStep;
  constexpr int kKeyElements = kTileElements<D, kStep>;
  bf16_t* sq = reinterpret_cast<bf16_t*>(shared);
  const QueryTileBlock<D, kStep> block(tiles, dims, sq + kTileElements<D, kQueryTile>);
  const int lane = threadIdx.x % kWarpSize;
  auto load_kv = [&](int step, int buffer) { block.load_keys(k, v, dims, step, buffer); };
  block.load_queries(sq, q, dims);
  load_kv(0, 0);

  float o[MT][D / 8][4] = {};
  float m[MT][2], l[MT][2] = {};  // rows g and g + 8 of each mma row tile
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = -INFINITY;
  pipelined(block.keys.steps, load_kv, [&](int step, int buffer) {
    const int s0 = block.keys.begin + step * kStep;
    const Coverage cover = query_rows_cover(block.t0, block.t_last, s0, kStep, block.tile, dims.window);
    if (!cover.any) return;
    const bf16_t* kbuf = block.key_buffer(buffer);
    float s[MT][kStep / 8][4] = {};
    mma_rows_by_rows<D, MT, kStep / 8>(s, sq + block.warp * kQueryWarpRows * kStride<D>, kbuf);
    float row_max[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      row_max[mt][0] = row_max[mt][1] = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kStep / 8; ++nt) {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int t = block.t0 + mt * kMmaRows + fragment_row(c), key = s0 + fragment_col(nt, c);
          const bool seen = cover.all || (t <= block.t_last && sees(t, key, block.tile.seq_begin, dims.window));
          s[mt][nt][c] = seen ? s[mt][nt][c] * dims.scale_log2 : -INFINITY;
          row_max[mt][c / 2] = fmaxf(row_max[mt][c / 2], s[mt][nt][c]);
        }
      }
    }
    float base[MT][2], rescale[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // the 4 lanes of a row hold its keys between them
        float& r = row_max[mt][half];
        r = fmaxf(r, __shfl_xor_sync(0xffffffffu, r, 1));
        r = fmaxf(r, __shfl_xor_sync(0xffffffffu, r, 2));
        const float m_new = fmaxf(m[mt][half], r);
        base[mt][half] = m_new == -INFINITY ? 0.0f : m_new;  // a row with no key seen yet keeps p = 0
        rescale[mt][half] = exp2f(m[mt][half] - base[mt][half]);
        m[mt][half] = m_new;
        l[mt][half] *= rescale[mt][half];
      }
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt) {
#pragma unroll
        for (int c = 0; c < 4; ++c) o[mt][nt][c] *= rescale[mt][c / 2];
      }
#pragma unroll
      for (int nt = 0; nt < kStep / 8; ++nt) {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          s[mt][nt][c] = exp2f(s[mt][nt][c] - base[mt][c / 2]);
          l[mt][c / 2] += s[mt][nt][c];
        }
      }
    }
    mma_weights_by_rows<D, MT, kStep>(o, s, kbuf + kKeyElements);
  });

  float inverse[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float& sum = l[mt][half];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      inverse[mt][half] = sum > 0.0f ? 1.0f / sum : 0.0f;
      const int t = block.t0 + mt * kMmaRows + fragment_row(2 * half);
      if (lane % 4 == 0 && t <= block.t_last)
        lse[int64_t{t} * dims.q_heads + block.h] = (m[mt][half] + log2f(sum)) * kLn2;
    }
  }
  store_rows<D, MT>(out, dims.q_heads, block.h, block.t0, block.t_last + 1, o, inverse);
}

// ---- bf16 backward -----------------------------------------------------------------------------
// dQ: per query tile and head, over the keys that the forward visits.
template <int D>
constexpr size_t query_gradient_shared_bytes() {  // Q, dO, then (K, V) × 2 buffers
  return sizeof(bf16_t) * (2 * kTileElements<D, kQueryTile> + 4 * kTileElements<D, kQueryGradientKeyStep>);
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    query_gradient_kernel(bf16_t* dq, const bf16_t* q, const bf16_t* k, const bf16_t* v, const bf16_t* dout,
                          const float* lse, const float* delta, const Tile* tiles, Dims dims) {
  extern __shared__ __align__(16) unsigned char shared[];
  constexpr int MT = kQueryMmas, kStep = kQueryGradientKeyStep;
  constexpr int kQueryElements = kTileElements<D, kQueryTile>, kKeyElements = kTileElements<D, kStep>;
  bf16_t* sq = reinterpret_cast<bf16_t*>(shared);
  bf16_t* sdo = sq + kQueryElements;
  const QueryTileBlock<D, kStep> block(tiles, dims, sdo + kQueryElements);
  auto load_kv = [&](int step, int buffer) { block.load_keys(k, v, dims, step, buffer); };
  block.load_queries(sq, q, dims);
  block.load_queries(sdo, dout, dims);
  load_kv(0, 0);

  float row_lse[MT][2], row_delta[MT][2];  // lse · log2 e and D of rows g and g + 8 of each row tile
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int t = block.t0 + mt * kMmaRows + fragment_row(2 * half);
      row_lse[mt][half] = t <= block.t_last ? lse[int64_t{t} * dims.q_heads + block.h] * kLog2e : 0.0f;
      row_delta[mt][half] = t <= block.t_last ? delta[int64_t{t} * dims.q_heads + block.h] : 0.0f;
    }
  }
  float acc[MT][D / 8][4] = {};
  pipelined(block.keys.steps, load_kv, [&](int step, int buffer) {
    const int s0 = block.keys.begin + step * kStep;
    const Coverage cover = query_rows_cover(block.t0, block.t_last, s0, kStep, block.tile, dims.window);
    if (!cover.any) return;
    const bf16_t* kbuf = block.key_buffer(buffer);
    float s[MT][kStep / 8][4] = {}, dp[MT][kStep / 8][4] = {};
    mma_rows_by_rows<D, MT, kStep / 8>(s, sq + block.warp * kQueryWarpRows * kStride<D>, kbuf);
    mma_rows_by_rows<D, MT, kStep / 8>(dp, sdo + block.warp * kQueryWarpRows * kStride<D>, kbuf + kKeyElements);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kStep / 8; ++nt) {
#pragma unroll
        for (int c = 0; c < 4; ++c) {  // s becomes dS
          const int t = block.t0 + mt * kMmaRows + fragment_row(c), key = s0 + fragment_col(nt, c);
          const bool seen = cover.all || (t <= block.t_last && sees(t, key, block.tile.seq_begin, dims.window));
          const float p = exp2f(s[mt][nt][c] * dims.scale_log2 - row_lse[mt][c / 2]);
          s[mt][nt][c] = seen ? p * (dp[mt][nt][c] - row_delta[mt][c / 2]) : 0.0f;
        }
      }
    }
    mma_weights_by_rows<D, MT, kStep>(acc, s, kbuf);
  });
  float factor[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) factor[mt][0] = factor[mt][1] = dims.scale;
  store_rows<D, MT>(dq, dims.q_heads, block.h, block.t0, block.t_last + 1, acc, factor);
}

// dK, dV: per key tile and kv head, over the query heads of the group and the query steps that see
// the tile's keys.
template <int D>
constexpr size_t key_value_gradient_shared_bytes() {
  // K, V, (Q, dO) × 2 buffers, then (lse·log2 e, D) × 2 buffers
  constexpr size_t kTiles = 2 * kTileElements<D, kKeyTile> + 4 * kTileElements<D, kBackwardStep>;
  return sizeof(bf16_t) * kTiles + sizeof(float) * 4 * kBackwardStep;
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    key_value_gradient_kernel(bf16_t* dk, bf16_t* dv, const bf16_t* q, const bf16_t* k, const bf16_t* v,
                              const bf16_t* dout, const float* lse, const float* delta, const Tile* tiles, Dims dims) {
  extern __shared__ __align__(16) unsigned char shared[];
  constexpr int kKeyElements = kTileElements<D, kKeyTile>, kQueryElements = kTileElements<D, kBackwardStep>;
  bf16_t* sk = reinterpret_cast<bf16_t*>(shared);
  bf16_t* sv = sk + kKeyElements;
  bf16_t* squeries = sv + kKeyElements;                                     // buffer b: Q at 2b, dO at 2b + 1
  float* sstats = reinterpret_cast<float*>(squeries + 4 * kQueryElements);  // buffer b: lse at 2b, D at 2b + 1
  const int g = blockIdx.x % dims.kv_heads;
  const Tile tile = tiles[blockIdx.x / dims.kv_heads];
  const int warp = threadIdx.x / kWarpSize;
  const int s0 = tile.begin + warp * kMmaRows, s_last = min(s0 + kMmaRows, tile.end) - 1;
  const int queries_end = last_query(tile.end - 1, tile.seq_end, dims.window) + 1;
  const int per_head = (queries_end - tile.begin + kBackwardStep - 1) / kBackwardStep;
  auto step_head = [&](int step) { return g * dims.group + step / per_head; };
  auto step_first = [&](int step) { return tile.begin + (step % per_head) * kBackwardStep; };
  auto load_queries = [&](int step, int buffer) {
    const int h = step_head(step), first = step_first(step);
    bf16_t* buf = squeries + 2 * buffer * kQueryElements;
    load_rows<D, kBackwardStep>(buf, q, dims.q_heads, h, first, queries_end);
    load_rows<D, kBackwardStep>(buf + kQueryElements, dout, dims.q_heads, h, first, queries_end);
    float* stats = sstats + 2 * buffer * kBackwardStep;
    for (int i = threadIdx.x; i < kBackwardStep; i += kThreads) {
      const int t = first + i;
      stats[i] = t < queries_end ? lse[int64_t{t} * dims.q_heads + h] * kLog2e : 0.0f;
      stats[kBackwardStep + i] = t < queries_end ? delta[int64_t{t} * dims.q_heads + h] : 0.0f;
    }
  };
  load_rows<D, kKeyTile>(sk, k, dims.kv_heads, g, tile.begin, tile.end);
  load_rows<D, kKeyTile>(sv, v, dims.kv_heads, g, tile.begin, tile.end);
  load_queries(0, 0);

  float dk_acc[1][D / 8][4] = {}, dv_acc[1][D / 8][4] = {};
  pipelined(dims.group * per_head, load_queries, [&](int step, int buffer) {
    const int t0 = step_first(step), t_last = t0 + kBackwardStep - 1;
    // Rows are keys s0 … s_last, columns queries t0 … t_last: Sᵀ and dPᵀ.
    const bool all = s_last == s0 + kMmaRows - 1 && t_last < tile.seq_end && s_last <= t0 &&
                     (dims.window == 0 || t_last - s0 < dims.window);
    if (s0 > s_last || t_last < s0 || t0 > last_query(s_last, tile.seq_end, dims.window)) return;
    const bf16_t* sq = squeries + 2 * buffer * kQueryElements;
    const float* stats = sstats + 2 * buffer * kBackwardStep;
    float st[1][kBackwardStep / 8][4] = {}, dpt[1][kBackwardStep / 8][4] = {};
    mma_rows_by_rows<D, 1, kBackwardStep / 8>(st, sk + warp * kMmaRows * kStride<D>, sq);
    mma_rows_by_rows<D, 1, kBackwardStep / 8>(dpt, sv + warp * kMmaRows * kStride<D>, sq + kQueryElements);
#pragma unroll
    for (int nt = 0; nt < kBackwardStep / 8; ++nt) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {  // st becomes Pᵀ, dpt dSᵀ
        const int key = s0 + fragment_row(c), column = fragment_col(nt, c), t = t0 + column;
        const bool seen = all || (key <= s_last && t < tile.seq_end && sees(t, key, tile.seq_begin, dims.window));
        const float p = seen ? exp2f(st[0][nt][c] * dims.scale_log2 - stats[column]) : 0.0f;
        st[0][nt][c] = p;
        dpt[0][nt][c] = seen ? p * (dpt[0][nt][c] - stats[kBackwardStep + column]) : 0.0f;
      }
    }
    mma_weights_by_rows<D, 1, kBackwardStep>(dv_acc, st, sq + kQueryElements);
    mma_weights_by_rows<D, 1, kBackwardStep>(dk_acc, dpt, sq);
  });
  const float dk_factor[1][2] = {{dims.scale, dims.scale}}, dv_factor[1][2] = {{1.0f, 1.0f}};
  store_rows<D, 1>(dk, dims.kv_heads, g, s0, s_last + 1, dk_acc, dk_factor);
  store_rows<D, 1>(dv, dims.kv_heads, g, s0, s_last + 1, dv_acc, dv_factor);
}

// ---- D_t = Σ_d dout_td · o_td (both dtypes) ------------------------------------------------------
template <class T>
__global__ void delta_kernel(float* delta, const T* dout, const T* out, int64_t rows, int head_dim) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / kWarpSize);
  for (int64_t r = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / kWarpSize; r < rows; r += warps) {
    float sum = 0.0f;
    for (int d = lane; d < head_dim; d += kWarpSize) {
      sum += to_float(dout[r * head_dim + d]) * to_float(out[r * head_dim + d]);
    }
    sum = warp_sum(sum);
    if (lane == 0) delta[r] = sum;
  }
}

// ---- f32: one warp per row ---------------------------------------------------------------------
// Channels lane, lane + 32, … of one head row, held by the lanes of a warp.
template <int D>
struct LaneRow {
  float x[D / kWarpSize] = {};
  __device__ void load(const float* row, float factor) {
#pragma unroll
    for (int i = 0; i < D / kWarpSize; ++i) x[i] = factor * row[threadIdx.x % kWarpSize + i * kWarpSize];
  }
  __device__ float dot(const float* row) const {
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < D / kWarpSize; ++i) sum += x[i] * row[threadIdx.x % kWarpSize + i * kWarpSize];
    return warp_sum(sum);
  }
  // x = factor · x + weight · row
  __device__ void update(float factor, float weight, const float* row) {
#pragma unroll
    for (int i = 0; i < D / kWarpSize; ++i)
      x[i] = factor * x[i] + weight * row[threadIdx.x % kWarpSize + i * kWarpSize];
  }
  __device__ void store(float* row, float factor) const {
#pragma unroll
    for (int i = 0; i < D / kWarpSize; ++i) row[threadIdx.x % kWarpSize + i * kWarpSize] = factor * x[i];
  }
};

// Online softmax over the keys, one at a time: m = running max of z, l = Σ exp(z − m).
template <int D>
__global__ void __launch_bounds__(kThreads) forward_rows_kernel(float* out, float* lse, const float* q, const float* k,
                                                                const float* v, const Tile* tiles, Dims dims) {
  const int h = blockIdx.x % dims.q_heads, g = h / dims.group;
  const Tile tile = tiles[blockIdx.x / dims.q_heads];
  for (int t = tile.begin + threadIdx.x / kWarpSize; t < tile.end; t += kWarps) {
    LaneRow<D> qt, o;
    qt.load(head_row<D>(q, t, dims.q_heads, h), dims.scale);
    float m = -INFINITY, l = 0.0f;
    for (int s = first_key(t, tile.seq_begin, dims.window); s <= t; ++s) {
      const float z = qt.dot(head_row<D>(k, s, dims.kv_heads, g));
      const float m_new = fmaxf(m, z), rescale = expf(m - m_new), p = expf(z - m_new);
      l = rescale * l + p;
      o.update(rescale, p, head_row<D>(v, s, dims.kv_heads, g));
      m = m_new;
    }
    o.store(head_row<D>(out, t, dims.q_heads, h), 1.0f / l);
    if (threadIdx.x % kWarpSize == 0) lse[int64_t{t} * dims.q_heads + h] = m + logf(l);
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    query_gradient_rows_kernel(float* dq, const float* q, const float* k, const float* v, const float* dout,
                               const float* lse, const float* delta, const Tile* tiles, Dims dims) {
  const int h = blockIdx.x % dims.q_heads, g = h / dims.group;
  const Tile tile = tiles[blockIdx.x / dims.q_heads];
  for (int t = tile.begin + threadIdx.x / kWarpSize; t < tile.end; t += kWarps) {
    LaneRow<D> qt, dot, acc;
    qt.load(head_row<D>(q, t, dims.q_heads, h), dims.scale);
    dot.load(head_row<D>(dout, t, dims.q_heads, h), 1.0f);
    const float lse_t = lse[int64_t{t} * dims.q_heads + h], delta_t = delta[int64_t{t} * dims.q_heads + h];
    for (int s = first_key(t, tile.seq_begin, dims.window); s <= t; ++s) {
      const float p = expf(qt.dot(head_row<D>(k, s, dims.kv_heads, g)) - lse_t);
      const float ds = p * (dot.dot(head_row<D>(v, s, dims.kv_heads, g)) - delta_t);
      acc.update(1.0f, ds, head_row<D>(k, s, dims.kv_heads, g));
    }
    acc.store(head_row<D>(dq, t, dims.q_heads, h), dims.scale);
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    key_value_gradient_rows_kernel(float* dk, float* dv, const float* q, const float* k, const float* v,
                                   const float* dout, const float* lse, const float* delta, const Tile* tiles,
                                   Dims dims) {
  const int g = blockIdx.x % dims.kv_heads;
  const Tile tile = tiles[blockIdx.x / dims.kv_heads];
  for (int s = tile.begin + threadIdx.x / kWarpSize; s < tile.end; s += kWarps) {
    LaneRow<D> ks, vs, dk_acc, dv_acc;
    ks.load(head_row<D>(k, s, dims.kv_heads, g), dims.scale);
    vs.load(head_row<D>(v, s, dims.kv_heads, g), 1.0f);
    for (int h = g * dims.group; h < (g + 1) * dims.group; ++h) {
      for (int t = s; t <= last_query(s, tile.seq_end, dims.window); ++t) {
        const int64_t row = int64_t{t} * dims.q_heads + h;
        const float p = expf(ks.dot(head_row<D>(q, t, dims.q_heads, h)) - lse[row]);
        const float ds = p * (vs.dot(head_row<D>(dout, t, dims.q_heads, h)) - delta[row]);
        dv_acc.update(1.0f, p, head_row<D>(dout, t, dims.q_heads, h));
        dk_acc.update(1.0f, ds, head_row<D>(q, t, dims.q_heads, h));
      }
    }
    dk_acc.store(head_row<D>(dk, s, dims.kv_heads, g), dims.scale);
    dv_acc.store(head_row<D>(dv, s, dims.kv_heads, g), 1.0f);
  }
}

// ---- host side ---------------------------------------------------------------------------------
// fn(std::integral_constant<int, D>{}) for the supported head dims.
template <class Fn>
void dispatch_head_dim(const char* op, int64_t head_dim, Fn&& fn) {
  switch (head_dim) {
    case 32: return fn(std::integral_constant<int, 32>{});
    case 64: return fn(std::integral_constant<int, 64>{});
    case 128: return fn(std::integral_constant<int, 128>{});
    default:
      throw std::invalid_argument(std::string(op) + ": shape: head_dim " + std::to_string(head_dim) +
                                  " has no CUDA kernel (supported: 32, 64, 128)");
  }
}

Dims make_dims(const char* op, const ops::AttentionShape& shape, int64_t tokens) {
  if (tokens >= std::numeric_limits<int32_t>::max() || shape.q_heads >= std::numeric_limits<int32_t>::max()) {
    throw std::invalid_argument(std::string(op) + ": q: more tokens or heads than the CUDA kernels index (2^31)");
  }
  const float scale = static_cast<float>(shape.scale);
  return {static_cast<int>(shape.q_heads),
          static_cast<int>(shape.kv_heads),
          static_cast<int>(shape.q_heads / shape.kv_heads),
          shape.window >= tokens ? 0 : static_cast<int>(shape.window),  // a window past N limits nothing
          scale,
          scale * kLog2e};
}

// The tiles of `size` tokens of every sequence, ordered by `work` (descending; stable).
template <class Work>
std::vector<Tile> tiles_by_work(const SeqLayout& seqs, int64_t size, Work&& work) {
  std::vector<Tile> tiles;
  for (int64_t i = 0; i < seqs.num_seqs(); ++i) {
    for (int64_t t = seqs.begin(i); t < seqs.end(i); t += size) {
      tiles.push_back({static_cast<int32_t>(t), static_cast<int32_t>(std::min(t + size, seqs.end(i))),
                       static_cast<int32_t>(seqs.begin(i)), static_cast<int32_t>(seqs.end(i))});
    }
  }
  std::stable_sort(tiles.begin(), tiles.end(), [&](const Tile& a, const Tile& b) { return work(a) > work(b); });
  return tiles;
}
// Query tiles (forward, dQ) by the keys they see; key tiles (dK, dV) by the queries that see them.
std::vector<Tile> query_tiles(const SeqLayout& seqs, const Dims& dims) {
  return tiles_by_work(seqs, kQueryTile,
                       [&](const Tile& t) { return t.end - first_key(t.begin, t.seq_begin, dims.window); });
}
std::vector<Tile> key_tiles(const SeqLayout& seqs, const Dims& dims) {
  return tiles_by_work(seqs, kKeyTile,
                       [&](const Tile& t) { return last_query(t.end - 1, t.seq_end, dims.window) - t.begin; });
}

// The tiles into a scratch piece, without waiting for the device (kernels/cuda/scratch.h).
const Tile* upload_tiles(void* piece, const std::vector<Tile>& tiles) {
  upload(piece, tiles.data(), tiles.size() * sizeof(Tile));
  return static_cast<const Tile*>(piece);
}

template <class Kernel>
void allow_shared_bytes(Kernel kernel, size_t bytes) {
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
             "cudaFuncSetAttribute (attention shared memory)");
}

void require_aligned(const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    if (!aligned16({t->raw()})) {
      throw std::invalid_argument(std::string(op) + ": bf16 tensors must start on a 16-byte boundary, got " +
                                  t->describe());
    }
  }
}

unsigned blocks(size_t tiles, int heads) { return static_cast<unsigned>(tiles * static_cast<size_t>(heads)); }

}  // namespace

void attention_forward(Tensor out, Tensor lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const ops::AttentionShape& shape, const SeqLayout& seqs) {
  const int64_t n = q.dim(0);
  dispatch_head_dim("attention_forward", shape.head_dim, [&](auto head_dim) {
    constexpr int D = decltype(head_dim)::value;
    if (n == 0) return;
    const Dims dims = make_dims("attention_forward", shape, n);
    const std::vector<Tile> tiles = query_tiles(seqs, dims);
    const Tile* device_tiles = upload_tiles(scratch({tiles.size() * sizeof(Tile)})[0], tiles);
    float* lse_data = data_of<float>(lse);
    const unsigned grid = blocks(tiles.size(), dims.q_heads);
    if (q.dtype() == DType::bf16) {
      require_aligned("attention_forward", {&out, &q, &k, &v});
      constexpr size_t bytes = forward_shared_bytes<D>();
      allow_shared_bytes(forward_kernel<D>, bytes);
      forward_kernel<D><<<grid, kThreads, bytes>>>(data_of<bf16_t>(out), lse_data, data_of<bf16_t>(q),
                                                   data_of<bf16_t>(k), data_of<bf16_t>(v), device_tiles, dims);
      check_launch("attention forward_kernel");
    } else {
      forward_rows_kernel<D><<<grid, kThreads>>>(data_of<float>(out), lse_data, data_of<float>(q), data_of<float>(k),
                                                 data_of<float>(v), device_tiles, dims);
      check_launch("attention forward_rows_kernel");
    }
  });
}

void attention_backward(Tensor dq, Tensor dk, Tensor dv, const Tensor& dout, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& out, const Tensor& lse, const ops::AttentionShape& shape,
                        const SeqLayout& seqs) {
  const int64_t n = q.dim(0);
  dispatch_head_dim("attention_backward", shape.head_dim, [&](auto head_dim) {
    constexpr int D = decltype(head_dim)::value;
    if (n == 0) return;
    const Dims dims = make_dims("attention_backward", shape, n);
    const std::vector<Tile> by_keys = query_tiles(seqs, dims), by_queries = key_tiles(seqs, dims);
    const int64_t rows = n * shape.q_heads;
    const std::vector<void*> pieces = scratch(
        {static_cast<size_t>(rows) * sizeof(float), by_keys.size() * sizeof(Tile), by_queries.size() * sizeof(Tile)});
    float* delta = static_cast<float*>(pieces[0]);
    const Tile* query_tiles_device = upload_tiles(pieces[1], by_keys);
    const Tile* key_tiles_device = upload_tiles(pieces[2], by_queries);
    const float* lse_data = data_of<float>(lse);
    const unsigned query_grid = blocks(by_keys.size(), dims.q_heads),
                   key_grid = blocks(by_queries.size(), dims.kv_heads);
    dispatch_float(q.dtype(), [&](auto zero) {
      using T = decltype(zero);
      delta_kernel<T><<<grid_stride_blocks(rows * kWarpSize), kThreadsPerBlock>>>(delta, data_of<T>(dout),
                                                                                  data_of<T>(out), rows, D);
      check_launch("attention delta_kernel");
    });
    if (q.dtype() == DType::bf16) {
      require_aligned("attention_backward", {&dq, &dk, &dv, &dout, &q, &k, &v});
      constexpr size_t key_bytes = key_value_gradient_shared_bytes<D>(), query_bytes = query_gradient_shared_bytes<D>();
      allow_shared_bytes(key_value_gradient_kernel<D>, key_bytes);
      allow_shared_bytes(query_gradient_kernel<D>, query_bytes);
      key_value_gradient_kernel<D><<<key_grid, kThreads, key_bytes>>>(
          data_of<bf16_t>(dk), data_of<bf16_t>(dv), data_of<bf16_t>(q), data_of<bf16_t>(k), data_of<bf16_t>(v),
          data_of<bf16_t>(dout), lse_data, delta, key_tiles_device, dims);
      check_launch("attention key_value_gradient_kernel");
      query_gradient_kernel<D><<<query_grid, kThreads, query_bytes>>>(
          data_of<bf16_t>(dq), data_of<bf16_t>(q), data_of<bf16_t>(k), data_of<bf16_t>(v), data_of<bf16_t>(dout),
          lse_data, delta, query_tiles_device, dims);
      check_launch("attention query_gradient_kernel");
    } else {
      key_value_gradient_rows_kernel<D>
          <<<key_grid, kThreads>>>(data_of<float>(dk), data_of<float>(dv), data_of<float>(q), data_of<float>(k),
                                   data_of<float>(v), data_of<float>(dout), lse_data, delta, key_tiles_device, dims);
      check_launch("attention key_value_gradient_rows_kernel");
      query_gradient_rows_kernel<D><<<query_grid, kThreads>>>(data_of<float>(dq), data_of<float>(q), data_of<float>(k),
                                                              data_of<float>(v), data_of<float>(dout), lse_data, delta,
                                                              query_tiles_device, dims);
      check_launch("attention query_gradient_rows_kernel");
    }
  });
}

}  // namespace linea::cuda
