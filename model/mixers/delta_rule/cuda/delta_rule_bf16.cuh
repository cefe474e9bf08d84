// The bf16 tensor-core pipeline of the CUDA delta rule (model/mixers/delta_rule/cuda/delta_rule_bf16_*.cu): what its
// kernels share. It takes bf16 token operands, a scalar decay or none and the β gate (DeltaNet,
// GDN), K and V multiples of 8, K ≤ 256 (tiles of Kd = 64, 128 or 256 key columns, zero past K),
// V ≤ 512 in tiles of 64 columns; model/mixers/delta_rule/cuda/delta_rule.cu sends it the calls it takes (bf16_takes).
//
// Notation of model/mixers/delta_rule/cpu/delta_rule_chunked.h, per chunk of L ≤ C = 64 tokens of one head:
// G_i = Σ_{s≤i} g_s, γ_i = exp(G_i), e_ij = exp(G_i − G_j) (j ≤ i), A_ij = β_i e_ij k_i·k_j (j < i),
// T = (I + A)⁻¹, W = T (βγ ⊙ K), U = T (β ⊙ V), Ũ = U − W S (S the state entering the chunk),
// P_ij = e_ij q_i·k_j (j ≤ i), O = scale (Q ⊙ γ) S + scale P Ũ, S ← γ_L S + (K ⊙ exp(G_L − G))ᵀ Ũ.
// The forward computes O as Q' S + R V, Q' = scale γ ⊙ Q − scale P W, R = scale P T diag(β)
// (delta_rule_bf16_intra.cu says why).
//
// Kernels (in order; bf16 stored, f32 accumulated; every product on mma.sync m16n8k16):
//   intra            per (chunk, head): G, T, W, U; for the output Q', R             (_intra.cu)
//   state_forward    per (sequence, head, 64 value columns), chunks in order: Ũ, the state
//                    entering each chunk (h), O when asked, ht                       (_state.cu)
//   state_backward   the same in reverse: dŨ = scale Pᵀ dO + (K ⊙ exp(G_L − G)) dS, the state
//                    gradient at each chunk's end (dh), dh0                          (_state.cu)
//   gradients        per (chunk, head): dq, dk, dv, dβ, dg written once              (_gradients.cu)
// Long sequences on a grid that would not fill the device run the state passes by segments of at
// most 64 chunks, chained by the segments' affine transitions (_segments.cu, delta_rule_bf16.cu).
// The forward runs intra and state_forward (with O); the backward runs intra and state_forward
// (without O, storing h and Ũ) again, then state_backward and gradients.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/chunk/cuda/mma_bf16.cuh"
#include "kernels/cuda/launch.h"
#include "model/mixers/delta_rule/cuda/delta_rule_chunk.cuh"

namespace linea::cuda::delta::bf16path {

using mma::bf16;
using mma::Tile;

inline constexpr int kC = kChunk;  // 64 tokens a chunk
inline constexpr int kBV = 64;     // value columns of a state block
inline constexpr int kMaxKd = 256;
inline constexpr int kMaxV = 512;  // intra holds a chunk's V rows whole

// One call's operands (bf16) as the kernels see them.
struct Problem {
  const bf16 *q, *k, *v, *beta;
  const float* g;  // null without decay
  Chunks chunks;
  int heads, key_dim, value_dim;
  float scale;
};

// Buffers between the kernels: G [N, H] f32; T [NC, H, C, C] (row-major, all C × C entries; the
// identity past L); W, Q' (Qe) [N, H, K], U, Ũ (Ut), dŨ (dUt) [N, H, V]; R [NC, H, C, C]; h (the
// state entering each chunk) and dh (∂L/∂ the state at each chunk's end) [NC, H, K, V]. A null
// pointer is not written (Qe and R: the forward's output only).
struct Workspace {
  float* G;
  bf16 *T, *W, *U, *Ut, *dUt, *h, *dh, *Qe, *R;
};

// The gradients (dg null without decay).
struct Outputs {
  bf16 *dq, *dk, *dv, *dbeta;
  float* dg;
};

struct Span {
  int64_t first;
  int len;
};
__device__ __forceinline__ Span chunk_span(const Chunks& chunks, int64_t c) {
  return {chunks.first[c], static_cast<int>(chunks.end[c] - chunks.first[c])};
}

// Starts copying the chunk's rows i < L, columns col0 + [0, C) of a [N, H, width] tensor (head
// `head`) into a tile of C columns; entries past L or past `width` become 0.
template <int C>
__device__ __forceinline__ void stage_rows(const Tile<C>& to, const bf16* from, const Span& s, int heads, int head,
                                           int width, int col0) {
  constexpr int kPieces = C / 8;
  for (int p = threadIdx.x; p < kC * kPieces; p += blockDim.x) {
    const int i = p / kPieces, c = col0 + 8 * (p % kPieces);
    const bool valid = i < s.len && c < width;
    const bf16* src = valid ? from + ((s.first + i) * heads + head) * static_cast<int64_t>(width) + c : from;
    mma::copy16(to.at(i, c - col0), src, valid);
  }
}

// Starts copying rows d < rows (of `valid_rows`), columns col0 + [0, C) of a row-major matrix with
// `ld` columns (of which `width` exist) into a tile; entries outside become 0.
template <int C>
__device__ __forceinline__ void stage_matrix(const Tile<C>& to, const bf16* from, int rows, int valid_rows, int64_t ld,
                                             int width, int col0) {
  constexpr int kPieces = C / 8;
  for (int p = threadIdx.x; p < rows * kPieces; p += blockDim.x) {
    const int i = p / kPieces, c = col0 + 8 * (p % kPieces);
    const bool valid = i < valid_rows && c < width;
    mma::copy16(to.at(i, c - col0), valid ? from + i * ld + c : from, valid);
  }
}

// Starts copying the chunk's per-row f32 values of a [N, H] tensor into to[0, C) (0 past L).
__device__ __forceinline__ void stage_row_values(float* to, const float* from, const Span& s, int heads, int head) {
  for (int i = threadIdx.x; i < kC; i += blockDim.x) {
    const bool valid = i < s.len;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(mma::shared_address(to + i)),
                 "l"(valid ? from + (s.first + i) * heads + head : from), "r"(valid ? 4 : 0));
  }
}

// Stores the tile's rows d < valid_rows, columns col0 + c < width to a row-major matrix with `ld`
// columns, 16 bytes at a time.
template <int C>
__device__ __forceinline__ void store_matrix(bf16* to, const Tile<C>& from, int rows, int valid_rows, int64_t ld,
                                             int width, int col0) {
  constexpr int kPieces = C / 8;
  for (int p = threadIdx.x; p < rows * kPieces; p += blockDim.x) {
    const int i = p / kPieces, c = 8 * (p % kPieces);
    if (i < valid_rows && col0 + c < width) {
      *reinterpret_cast<uint4*>(to + i * ld + col0 + c) = *reinterpret_cast<const uint4*>(from.at(i, c));
    }
  }
}

// Writes the pair (x0, x1) at (i, j), (i, j + 1) of a bf16 tile.
template <int C>
__device__ __forceinline__ void put(const Tile<C>& t, int i, int j, float x0, float x1) {
  *reinterpret_cast<uint32_t*>(t.at(i, j)) = mma::pack(x0, x1);
}
template <int C>
__device__ __forceinline__ float2 get(const Tile<C>& t, int i, int j) {
  return mma::unpack(*reinterpret_cast<const uint32_t*>(t.at(i, j)));
}
// Writes the pair at row `row`, column j of a [N·H, width] bf16 tensor (j even, width even).
__device__ __forceinline__ void put_global(bf16* base, int64_t row, int width, int j, float x0, float x1) {
  *reinterpret_cast<uint32_t*>(base + row * width + j) = mma::pack(x0, x1);
}

// The warps of a block (8) over a 64 × N result: warp w takes rows 16 (w % 4).. and the columns
// (w / 4) N/2.. .
__device__ __forceinline__ int warp_index() { return static_cast<int>(threadIdx.x) >> 5; }
__device__ __forceinline__ int warp_row0() { return 16 * (warp_index() & 3); }
__device__ __forceinline__ int warp_half() { return warp_index() >> 2; }

// The state tile [Kd, 64] in the registers of 8 warps: Kd ≥ 128: warp w holds the row tiles w,
// w + 8, … (kRowTiles of 16 rows) and all 8 column tiles; Kd = 64: row tile w % 4, column tiles
// 4 (w / 4)...
template <int Kd>
struct StateLayout {
  static constexpr int kRowTiles = Kd >= 128 ? Kd / 128 : 1;
  static constexpr int kColTiles = Kd >= 128 ? 8 : 4;
  __device__ static int row0(int m) { return Kd >= 128 ? 16 * (warp_index() + 8 * m) : 16 * (warp_index() & 3); }
  __device__ static int col0() { return Kd >= 128 ? 0 : 32 * (warp_index() >> 2); }
};
template <int Kd>
using StateAcc = float[StateLayout<Kd>::kRowTiles][StateLayout<Kd>::kColTiles][4];

// fn(d, e, v0, v1) over the thread's entries of the state tile, as pairs (d, e), (d, e + 1) (row
// d < Kd, column e < 64, even); v0 and v1 are references.
template <int Kd, class Fn>
__device__ __forceinline__ void for_state(StateAcc<Kd>& s, Fn fn) {
  using SL = StateLayout<Kd>;
#pragma unroll
  for (int m = 0; m < SL::kRowTiles; ++m) {
#pragma unroll
    for (int n = 0; n < SL::kColTiles; ++n) mma::for_pairs(s[m][n], SL::row0(m), SL::col0() + 8 * n, fn);
  }
}

// The key-column tiles a call uses: Kd = 64, 128 or 256.
inline int key_tile(int key_dim) { return key_dim <= 64 ? 64 : key_dim <= 128 ? 128 : 256; }

// fn(std::integral_constant<int, Kd>{}) for the call's key tile.
template <class Fn>
void dispatch_key_tile(int key_dim, Fn&& fn) {
  switch (key_tile(key_dim)) {
    case 64: return fn(std::integral_constant<int, 64>{});
    case 128: return fn(std::integral_constant<int, 128>{});
    default: return fn(std::integral_constant<int, 256>{});
  }
}

// A sequence's segments (runs of at most kSegmentChunks chunks) as the chain of
// delta_rule_bf16_segments.cu sees them: sequence s has segments [seq_segment[s], seq_segment[s + 1])
// (device array). Forward: visited = S_start ← the chain of S_end = A S_start + add from first = h0,
// last = ht; backward (reverse): visited = dS_end ← the chain of dS_start = Aᵀ dS_end + add from
// first = dht, last = dh0. A [segments, H, K, K], add and visited [segments, H, K, V], first and last
// [S, H, K, V] (null: zeros, not written), all f32.
inline constexpr int kSegmentChunks = 64;
struct Chain {
  const int64_t* seq_segment;
  int64_t seqs;
  int heads, key_dim, value_dim;
  const float *A, *add;
  float* visited;
  const float* first;
  float* last;
};

// The launchers (one file each).
void intra(const Problem& p, const Workspace& ws);
// o null: no output (the backward's recomputation). h0, ht may be null.
void state_forward(const Problem& p, const Workspace& ws, const float* h0, float* ht, bf16* o);
// dht, dh0 may be null.
void state_backward(const Problem& p, const Workspace& ws, const bf16* d_o, const float* dht, float* dh0);
void gradients(const Problem& p, const Workspace& ws, const bf16* d_o, const Outputs& out);
void chain(const Chain& c, bool reverse);
// Every [K, K] state of a stack of `count` ← the identity.
void fill_identity(float* states, int64_t count, int key_dim);

}  // namespace linea::cuda::delta::bf16path
