// The bf16 tensor-core pipeline of the CUDA delta rule (model/mixers/delta_rule/cuda/delta_rule_bf16_*.cu): what
// its kernels share. It takes bf16 token operands of DeltaNet and GDN (no decay or a scalar one, the
// β gate) and of KDA and GDN-2 (a decay per key channel; the β gate, or GDN-2's erase gate b and
// write gate w), K and V multiples of 8, K ≤ 256 (tiles of Kd = 64, 128 or 256 key columns, zero
// past K), V ≤ 512 in tiles of 64 columns; model/mixers/delta_rule/cuda/delta_rule.cu sends it the calls it
// takes (bf16_takes).
//
// Notation of model/mixers/delta_rule/cpu/delta_rule_chunked.h, per chunk of L ≤ C = 64 tokens of
// one head: G_i = Σ_{s≤i} g_s, γ_i = exp(G_i), e_ij = exp(G_i − G_j) (j ≤ i), A_ij = β_i e_ij k_i·k_j
// (j < i), T = (I + A)⁻¹, W = T (βγ ⊙ K), U = T (β ⊙ V), Ũ = U − W S (S the state entering the
// chunk), P_ij = e_ij q_i·k_j (j ≤ i), O = scale (Q ⊙ γ) S + scale P Ũ,
// S ← γ_L S + (K ⊙ exp(G_L − G))ᵀ Ũ. The forward computes O as Q' S + R V, Q' = scale γ ⊙ Q − scale P W,
// R = scale P T diag(β) (delta_rule_bf16_intra.cu says why). With a decay per channel G, γ and e
// carry a channel index d (A_ij = β_i Σ_d k_id k_jd e_ijd, W = T diag(β) (K ⊙ γ), the state's rows
// decay by γ_L,d); GDN-2 has b_i ⊙ k_i for β_i k_i in A and W, and w ⊙ V for β ⊙ V in U.
//
// Kernels (in order; bf16 stored, f32 accumulated; every product on mma.sync m16n8k16):
//   intra            per (chunk, head): G, T, W, U; for the output Q', R             (_intra.cu)
//   state_forward    per (sequence, head, 64 value columns), chunks in order: Ũ, the state
//                    entering each chunk (h), O when asked, ht                       (_state.cu)
//   state_backward   the same in reverse: dŨ = scale Pᵀ dO + (K ⊙ exp(G_L − G)) dS, the state
//                    gradient at each chunk's end (dh), dh0                          (_state.cu)
//   gradients        per (chunk, head): dq, dk, dv, dβ (or db, dw), dg written once  (_gradients.cu)
// A decay per channel is handled inside a chunk by blocks of 16 rows (delta_rule_bf16_channel.cuh),
// and its intra also stores what the state passes cannot form from q and k themselves:
// K ⊙ exp(G_L − G), G_L, and for the backward scale Q ⊙ γ and scale P.
// Long sequences on a grid that would not fill the device run the state passes by segments of at
// most 64 chunks, chained by the segments' affine transitions (_segments.cu, delta_rule_bf16.cu).
// The forward runs intra and state_forward (with O); the backward runs intra and state_forward
// (without O, storing h and Ũ) again, then state_backward and gradients. A forward given a saved
// buffer (ops::delta_rule_saved_bytes; for the plain write ops::gla_saved_bytes) also stores h, Ũ
// (not for a plain write) and, with a decay per channel, scale Q ⊙ γ and scale P there, and its
// backward starts at state_backward.
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

// One call's operands (bf16) as the kernels see them. `plain`: no delta correction, the keys write
// as they are, S ← γ_L S + (K ⊙ exp(G_L − G))ᵀ V (the gated-linear-attention family,
// model/mixers/gla/cuda/gla.cu): T = I, W = 0, U = Ũ = V and β = 1 throughout; intra forms only
// G (and the decay per channel's tiles) and the output's Q' = scale γ ⊙ Q and R = P, the state
// passes skip the W products, state_backward's dŨ is dv, and gradients skips what flows through
// T, W and β. With `plain`, gate is GateKind::beta and beta is null.
// `u` (RWKV-6's bonus readout; a plain write with a decay per channel only, else null): the readout
// reads the state before the token's write plus the bonus, o_t = scale (S_{t−1}ᵀ q_t +
// (q_t · (u ⊙ k_t)) v_t), u [H, K] f32. Per chunk the query side decays by R_i = G_{i−1} (R_0 = 0)
// for G: intra's P has the pairs j < i with exp(R_i − G_j) and the diagonal scale Σ_d q_id u_d k_id,
// its Q' and Qg are scale Q ⊙ exp(R); the state passes and the segments read them as they are
// (S_end is the after-write one), and gradients adds the bonus's terms and writes du's part of each
// chunk (Workspace::du_parts).
struct Problem {
  const bf16 *q, *k, *v;
  const bf16* beta;        // GateKind::beta: [N, H]
  const bf16 *b, *w;       // GateKind::erase_write: [N, H, K], [N, H, V]
  const float* g;          // [N, H] (scalar decay), [N, H, K] (channel), null without decay
  int64_t g_token_stride;  // of a scalar decay: H, or 0 for one value per head ([H], RetNet's)
  Chunks chunks;
  int heads, key_dim, value_dim;
  float scale;
  ops::DecayKind decay;
  ops::GateKind gate;
  bool plain;
  const float* u;  // [H, K], or null
};

// Buffers between the kernels: G [N, H] f32 (scalar decay); T [NC, H, C, C] (row-major, all C × C
// entries; the identity past L); W, Q' (Qe) [N, H, K], U, Ũ (Ut), dŨ (dUt) [N, H, V]; R
// [NC, H, C, C]; h (the state entering each chunk) and dh (∂L/∂ the state at each chunk's end)
// [NC, H, K, V]. A decay per channel has instead of G: Glast [NC, H, K] f32 (G at each chunk's last
// row), Kend = K ⊙ exp(G_L − G) [N, H, K]; for the backward Qg = scale Q ⊙ γ [N, H, K] and
// P = scale P [NC, H, C, C] (zero above the diagonal); for GDN-2's forward output Vw = w ⊙ V
// [N, H, V]. A null pointer is not written: Qe, R and Vw are the forward's output only; Ut, h, Qg
// and P are written where given (the backward's recomputation, or a forward that saves them).
// A plain write has no T and W (null: the state passes read W as zeros), U is V itself (read
// only), Ũ is not stored (gradients reads V in its place) and dŨ is the dv output. With the bonus
// (Problem::u) the backward's du_parts [NC, H, K] f32: Σ_i δ_i q_i ⊙ k_i of each chunk (gradients).
struct Workspace {
  float *G, *Glast;
  bf16 *T, *W, *U, *Ut, *dUt, *h, *dh, *Qe, *R, *Kend, *Qg, *P, *Vw;
  float* du_parts;
};

// The gradients (dg null without decay; dbeta with the β gate, db and dw with GDN-2's).
struct Outputs {
  bf16 *dq, *dk, *dv, *dbeta, *db, *dw;
  float* dg;
};

// The kinds the pipeline takes: no decay or a scalar one with the β gate; a decay per channel with
// either gate.
inline bool takes_kinds(ops::DecayKind decay, ops::GateKind gate) {
  return gate == ops::GateKind::beta || decay == ops::DecayKind::channel;
}

// fn(DecayConstant{}, GateConstant{}) (delta_rule_chunk.cuh) for the given kinds (ones that
// takes_kinds).
template <class Fn>
void dispatch_kinds(ops::DecayKind decay, ops::GateKind gate, Fn&& fn) {
  using ops::DecayKind, ops::GateKind;
  if (decay == DecayKind::none) return fn(DecayConstant<DecayKind::none>{}, GateConstant<GateKind::beta>{});
  if (decay == DecayKind::scalar) return fn(DecayConstant<DecayKind::scalar>{}, GateConstant<GateKind::beta>{});
  if (gate == GateKind::beta) return fn(DecayConstant<DecayKind::channel>{}, GateConstant<GateKind::beta>{});
  return fn(DecayConstant<DecayKind::channel>{}, GateConstant<GateKind::erase_write>{});
}

struct Span {
  int64_t first;
  int len;
};
__device__ __forceinline__ Span chunk_span(const Chunks& chunks, int64_t c) {
  return {chunks.first[c], static_cast<int>(chunks.end[c] - chunks.first[c])};
}

// Starts copying the chunk's rows i < L, columns col0 + [0, C) of a [N, H, width] tensor (head
// `head`) into a tile of C columns; entries past L or past `width` become 0, and all of them when
// `from` is null (a tensor of zeros).
template <int C>
__device__ __forceinline__ void stage_rows(const Tile<C>& to, const bf16* from, const Span& s, int heads, int head,
                                           int width, int col0) {
  constexpr int kPieces = C / 8;
  for (int p = threadIdx.x; p < kC * kPieces; p += blockDim.x) {
    const int i = p / kPieces, c = col0 + 8 * (p % kPieces);
    if (!from) {
      *reinterpret_cast<uint4*>(to.at(i, c - col0)) = uint4{0, 0, 0, 0};
      continue;
    }
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

// Stores a tile's rows i < L, columns col0 + [0, C) (those < width) to the chunk's rows of a
// [N, H, width] tensor (head `head`), 16 bytes at a time.
template <int C>
__device__ __forceinline__ void store_rows(bf16* to, const Tile<C>& from, const Span& s, int heads, int head, int width,
                                           int col0) {
  constexpr int kPieces = C / 8;
  for (int p = threadIdx.x; p < kC * kPieces; p += blockDim.x) {
    const int i = p / kPieces, c = 8 * (p % kPieces);
    if (i < s.len && col0 + c < width) {
      *reinterpret_cast<uint4*>(to + ((s.first + i) * heads + head) * static_cast<int64_t>(width) + col0 + c) =
          *reinterpret_cast<const uint4*>(from.at(i, c));
    }
  }
}

// Starts copying `count` f32 values (a multiple of 4, 16-byte aligned) into to[0, n) (0 past count).
__device__ __forceinline__ void stage_vector(float* to, const float* from, int count, int n) {
  for (int p = threadIdx.x; 4 * p < n; p += blockDim.x) {
    const bool valid = 4 * p < count;
    mma::copy16(to + 4 * p, valid ? from + 4 * p : from, valid);
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
template <int C>
__device__ __forceinline__ float entry(const Tile<C>& t, int i, int j) {
  return __bfloat162float(*t.at(i, j));
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
