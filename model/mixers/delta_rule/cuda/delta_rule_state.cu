// The two sequential passes over the chunks of a sequence, one block per (sequence, head, tile of BV
// value columns): the columns of the state never mix, so V splits across blocks. The host picks
// BV ∈ {64, 32, 16} (64 for K ≤ 128 only), the largest whose grid still fills the device (long
// sequences: few of them, small tiles, more blocks).
//
// state_forward, chunks in order, S = h0 (or 0) at the sequence start:
//   S_chunk = S                                   (stored: the state entering the chunk)
//   Ũ = U − W S                                   (stored)
//   S ← Diag(γ_L) S + Kendᵀ Ũ,  Kend = K ⊙ exp(G_L − G);   ht = S after the last chunk
// state_backward, chunks in reverse, dS = dht (or 0) at the sequence end, dŨ holding scale·Pᵀ dO:
//   dS_chunk = dS                                 (stored: ∂L/∂ state at the chunk's end)
//   dŨ += Kend dS                                 (stored)
//   dS ← Diag(γ_L) dS + Qgᵀ dO − Wᵀ dŨ,  Qg = scale · Q ⊙ γ;   dh0 = dS at the sequence start
//   (with the write error's gradient dR of a GateKind::beta call, + KgNegᵀ dR, KgNeg = −K ⊙ γ:
//   R = V − (K ⊙ γ) S0 − M Ũ, model/mixers/delta_rule/cuda/delta_rule_write_error.cu)
//
// Both products of a chunk run on the tensor cores (mma.sync m16n8k8 in 3×TF32 as block_gemm.cuh,
// f32 accumulate). The state tile [K, BV] stays in f32 registers as the accumulators of the update
// (warp w owns rows 16w.., and 16(w + 8).. when BV < 64; all BV columns), with a copy in shared
// memory for the product W S (or Kend dS). A chunk is a few phases, each with one [C, K] row
// tile (forward: W, then Kend; backward: Kend, Qg, KgNeg with dR, W) and, where the phase needs
// one, a [C, BV] value tile (U; dŨ; dO; dR) and the row G_L of log decays. The tiles stream
// through a ring of 2–4 slots in shared memory by cp.async, as many phases ahead of the computation
// as the ring has slots beyond the one being read, so that loading overlaps the products. Every sum
// runs in a fixed order: the result does not depend on scheduling.
#include <cuda_pipeline.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <type_traits>

#include "kernels/cuda/check.h"
#include "kernels/cuda/launch.h"
#include "model/mixers/delta_rule/cuda/delta_rule_chunk.cuh"

namespace linea::cuda::delta {

namespace {

constexpr int kWarps = kThreads / 32;
constexpr int kMinSlots = 2, kMaxSlots = 4;
constexpr int kTileWidths[] = {64, 32, 16};  // the value tiles BV, preferred first

__host__ __device__ constexpr int round_up(int x, int m) { return (x + m - 1) / m * m; }

// A row tile [C][pitch] of f32, pitch = K rounded up to 32: the 16-byte quads of row i are permuted
// (quad ^ swizzle(i)), so that the fragment reads of both products — 8 rows × 4 columns (A = X) and
// 4 rows × 8 columns (A = Xᵀ) — hit 32 different banks. Columns K.. stay 0.
__host__ __device__ constexpr int row_tile_pitch(int key_dim) { return round_up(key_dim, 32); }

__device__ __forceinline__ int swizzle(int i) { return ((i & 3) << 1) | ((i >> 2) & 1); }

struct RowTileIndex {
  int pitch;
  __device__ int operator()(int i, int d) const { return i * pitch + ((((d >> 2) ^ swizzle(i)) << 2) | (d & 3)); }
};

// A value tile [rows][pitch] (the state copy, Ũ, U, dŨ, dO): the row pitch is 32 bytes more than
// a multiple of 64, so that the B fragments (4 rows × 8 columns) hit 32 different banks.
__host__ __device__ constexpr int value_tile_pitch(int BV) { return (round_up(4 * BV, 64) + 32) / 4; }

struct ValueTileIndex {
  int pitch;
  __device__ int operator()(int i, int e) const { return i * pitch + e; }
};

// Shared memory, in floats: the state copy [round32(K)][vp] (rows K.. stay 0), the tile Ũ
// (forward) or −dŨ (backward) [C][vp], and `slots` ring slots, each a row tile [C][rp], a value
// tile [C][vp] and a row of log decays [rp].
__host__ __device__ constexpr int64_t slot_floats(int K, int BV) {
  return int64_t{kChunk} * row_tile_pitch(K) + int64_t{kChunk} * value_tile_pitch(BV) + row_tile_pitch(K);
}

size_t state_shared_bytes(int K, int BV, int slots) {
  const int64_t vp = value_tile_pitch(BV);
  return sizeof(float) * static_cast<size_t>(round_up(K, 32) * vp + kChunk * vp + slots * slot_floats(K, BV));
}

struct SharedState {
  float *S, *Ut, *ring;
  int64_t slot_size;
  int rp, vp;
  __device__ SharedState(float* shared, int K, int BV)
      : S(shared),
        Ut(shared + round_up(K, 32) * value_tile_pitch(BV)),
        ring(Ut + kChunk * value_tile_pitch(BV)),
        slot_size(slot_floats(K, BV)),
        rp(row_tile_pitch(K)),
        vp(value_tile_pitch(BV)) {}
  __device__ float* rows(int slot) const { return ring + slot * slot_size; }
  __device__ float* values(int slot) const { return rows(slot) + kChunk * rp; }
  __device__ float* decays(int slot) const { return values(slot) + kChunk * vp; }
};

// ---- asynchronous staging -------------------------------------------------------------------

// Starts copying rows i < L, columns c < n of a global matrix (row i at from + i·stride) into a
// tile (entry (i, c) at to[at(i, c)]) and zeroes the tile's rows L..C−1 (columns < n), with
// kRowThreads threads (a power of 2) to a row: 16-byte copies when n, stride and `from` allow,
// else 4-byte ones.
template <int kRowThreads, class At>
__device__ void stage_tile(const float* from, int64_t stride, int L, int n, float* to, At at) {
  constexpr int kRowsAtOnce = kThreads / kRowThreads;
  const int r = static_cast<int>(threadIdx.x) / kRowThreads, c0 = static_cast<int>(threadIdx.x) % kRowThreads;
  if (n % 4 == 0 && stride % 4 == 0 && reinterpret_cast<uintptr_t>(from) % 16 == 0) {
    for (int i = r; i < L; i += kRowsAtOnce) {
      for (int c = 4 * c0; c < n; c += 4 * kRowThreads)
        __pipeline_memcpy_async(to + at(i, c), from + i * stride + c, 16);
    }
  } else {
    for (int i = r; i < L; i += kRowsAtOnce) {
      for (int c = c0; c < n; c += kRowThreads) __pipeline_memcpy_async(to + at(i, c), from + i * stride + c, 4);
    }
  }
  for (int i = L + r; i < kChunk; i += kRowsAtOnce) {
    for (int c = c0; c < n; c += kRowThreads) to[at(i, c)] = 0.0f;
  }
}

// The threads to a row of a row tile (K ≤ 256 floats: 64 quads) and of a value tile of BV floats
// (one 16-byte copy each).
constexpr int kRowTileThreads = 32;
template <int BV>
inline constexpr int kValueTileThreads = BV / 4;

// Starts copying n floats.
__device__ void stage_floats(const float* from, int n, float* to) {
  for (int p = threadIdx.x; p < n; p += kThreads) __pipeline_memcpy_async(to + p, from + p, 4);
}

// Waits until at most `pending` (≤ 2) of the thread's most recent copy batches are in flight.
__device__ void wait_for_copies(int pending) {
  if (pending == 0) {
    __pipeline_wait_prior(0);
  } else if (pending == 1) {
    __pipeline_wait_prior(1);
  } else {
    __pipeline_wait_prior(2);
  }
}

struct Span {
  int64_t first;
  int len;
};

__device__ Span span_of(const Chunks& chunks, int64_t chunk) {
  return {chunks.first[chunk], static_cast<int>(chunks.end[chunk] - chunks.first[chunk])};
}

// The ring: phases j = 0, 1, … < phases, phase j in slot j % slots. stage(j, slot, span) starts
// phase j's copies (span: its chunk, chunk_of(j)); compute(j, slot, span) runs once they have
// landed. Copies run `slots − 1` phases ahead; one barrier per phase both publishes phase j's tiles
// and frees slot (j − 1) % slots for phase j + slots − 1. The chunk table is read a phase earlier
// still, so that no copy waits on it.
template <class ChunkOf, class Stage, class Compute>
__device__ void run_phases(const Chunks& chunks, int phases, int slots, ChunkOf chunk_of, Stage stage,
                           Compute compute) {
  __shared__ Span spans[kMaxSlots];
  for (int j = 0; j < slots - 1; ++j) {
    if (j < phases) {
      const Span s = span_of(chunks, chunk_of(j));
      if (threadIdx.x == 0) spans[j] = s;
      stage(j, j, s);
    }
    __pipeline_commit();
  }
  Span ahead = span_of(chunks, chunk_of(min(slots - 1, phases - 1)));
  int slot = 0, slot_ahead = slots - 1;  // j % slots, (j + slots − 1) % slots
  for (int j = 0; j < phases; ++j) {
    wait_for_copies(slots - 2);
    __syncthreads();
    const int j_ahead = j + slots - 1;
    if (j_ahead < phases) {
      const Span s = ahead;
      ahead = span_of(chunks, chunk_of(min(j_ahead + 1, phases - 1)));
      if (threadIdx.x == 0) spans[slot_ahead] = s;
      stage(j_ahead, slot_ahead, s);
    }
    __pipeline_commit();
    compute(j, slot, spans[slot]);
    slot = slot + 1 == slots ? 0 : slot + 1;
    slot_ahead = slot_ahead + 1 == slots ? 0 : slot_ahead + 1;
  }
}

// ---- the tensor-core products ---------------------------------------------------------------

// N operand values for the TF32 products, which read the sign, the exponent and the top 10 bits of
// the mantissa of each 32-bit value and ignore the 13 below (3×TF32): big = x truncated to them,
// small = x − big (exact), whose own truncation costs below 2⁻²⁰ |x|.
template <int N>
struct Tf32 {
  uint32_t big[N], small[N];
  __device__ void set(int r, float x) {
    big[r] = __float_as_uint(x) & 0xffffe000u;
    small[r] = __float_as_uint(x - __uint_as_float(big[r]));
  }
};

__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// d += a b on one 16×8×8 tile in 3×TF32: a_small b_big + a_big b_small + a_big b_big.
__device__ __forceinline__ void mma(float (&d)[4], const Tf32<4>& a, const Tf32<2>& b) {
  mma_tf32(d, a.small, b.big);
  mma_tf32(d, a.big, b.small);
  mma_tf32(d, a.big, b.big);
}

// The fragment coordinates of lane (g = lane / 4, t = lane % 4): A (16×8) holds (g, t), (g + 8, t),
// (g, t + 4), (g + 8, t + 4); B (8×8) holds (t, g), (t + 4, g); the 16×8 result holds (g, 2t),
// (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1).
struct Lane {
  int warp = static_cast<int>(threadIdx.x) / 32, g = static_cast<int>(threadIdx.x) % 32 / 4,
      t = static_cast<int>(threadIdx.x) % 4;
};

// ldmatrix .x4: lane 8j + r gives the (16-byte aligned) address of row r of block j; every lane
// receives the 32-bit word lane % 4 of row lane / 4 of each block j in v[j].
__device__ __forceinline__ void load_fragment_rows(uint32_t (&v)[4], const float* row) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
               : "r"(address));
}

// The first product, X S for a row tile X [C, K] and the state copy S [K, BV]: the warp computes
// rows m0 = 16 (warp % 4).. and the BV/2 columns (warp / 4) BV/2.. (n-tiles of 8), over the depth
// K rounded up to 32 (both are 0 past K; even and odd steps in two sums, added at the end).
template <int BV>
__device__ void rows_times_state(const float* X, int xp, const float* S, int sp, int K, float (&out)[BV / 16][4]) {
  constexpr int kTiles = BV / 16;
  const Lane l;
  const int m0 = 16 * (l.warp % 4), n0 = (l.warp / 4) * (BV / 2), lane = static_cast<int>(threadIdx.x) % 32;
  // A's fragment in one ldmatrix: its four 8×4 blocks of 32-bit values (rows m0.. and m0 + 8..,
  // columns k.. and k + 4.., k a multiple of 8) are 8×8 blocks of 16-bit halves to ldmatrix, which
  // hands them out in the fragment's order. Lane 8j + r gives the address of row r of block j: row
  // m0 + r + 8 (j % 2), quad k / 4 + j / 2, stored at quad (k / 4 + j / 2) ^ swizzle(r).
  const float* x = X + (m0 + lane % 8 + 8 * (lane / 8 % 2)) * xp;
  const int quad_swizzle = swizzle(lane % 8) ^ (lane / 16);
  const float* s = S + l.t * sp + n0 + l.g;
  float sums[2][kTiles][4] = {};
  const auto step = [&](int k, float(&sum)[kTiles][4]) {
    uint32_t raw[4];
    load_fragment_rows(raw, x + (((k >> 2) ^ quad_swizzle) << 2));
    Tf32<4> a;
#pragma unroll
    for (int r = 0; r < 4; ++r) a.set(r, __uint_as_float(raw[r]));
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      Tf32<2> b;
      b.set(0, s[k * sp + 8 * j]);
      b.set(1, s[(k + 4) * sp + 8 * j]);
      mma(sum[j], a, b);
    }
  };
  for (int k = 0; k < K; k += 32) {
    step(k, sums[0]);
    step(k + 8, sums[1]);
    step(k + 16, sums[0]);
    step(k + 24, sums[1]);
  }
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
#pragma unroll
    for (int r = 0; r < 4; ++r) out[j][r] = sums[0][j][r] + sums[1][j][r];
  }
}

// fn(i, e, v) for the entries of rows_times_state's result (row i, tile column e).
template <int BV, class Fn>
__device__ void for_each_product_entry(const float (&out)[BV / 16][4], Fn fn) {
  const Lane l;
  const int m0 = 16 * (l.warp % 4), n0 = (l.warp / 4) * (BV / 2);
#pragma unroll
  for (int j = 0; j < BV / 16; ++j) {
#pragma unroll
    for (int r = 0; r < 4; ++r) fn(m0 + l.g + 8 * (r / 2), n0 + 8 * j + 2 * l.t + r % 2, out[j][r]);
  }
}

// The state accumulators: rows 16 (warp + 8 m).. (m < kRowTiles, rows < K rounded up to 16), all
// BV columns. The widest tile takes K ≤ 128 only (one row tile a warp: fewer registers).
__host__ __device__ constexpr int row_tiles(int BV) { return BV == 64 ? 1 : 2; }
__host__ __device__ constexpr int max_key_dim(int BV) { return 16 * kWarps * row_tiles(BV); }
static_assert(max_key_dim(32) == kMaxKeyDim && max_key_dim(16) == kMaxKeyDim);
template <int BV>
using StateRegisters = float[row_tiles(BV)][BV / 8][4];

// fn(d, e, value) for the thread's state entries (row d < K rounded up to 16, tile column e).
template <int BV, class State, class Fn>
__device__ void for_each_state_entry(State& acc, int K, Fn fn) {
  const Lane l;
#pragma unroll
  for (int m = 0; m < row_tiles(BV); ++m) {
    const int m0 = 16 * (l.warp + kWarps * m);
    if (m0 >= K) break;
#pragma unroll
    for (int n = 0; n < BV / 8; ++n) {
#pragma unroll
      for (int r = 0; r < 4; ++r) fn(m0 + l.g + 8 * (r / 2), 8 * n + 2 * l.t + r % 2, acc[m][n][r]);
    }
  }
}

// The second product, acc += Yᵀ Z for a row tile Y [C, K] and a value tile Z [C, BV], over the
// rows i < L rounded up to 8 (rows L.. of Y are 0).
template <int BV>
__device__ void add_transposed_product(StateRegisters<BV>& acc, const float* Y, int yp, const float* Z, int zp, int L,
                                       int K) {
  const Lane l;
  const float* y = Y + l.t * yp;
  const float* z = Z + l.t * zp + l.g;
#pragma unroll
  for (int m = 0; m < row_tiles(BV); ++m) {
    const int m0 = 16 * (l.warp + kWarps * m);
    if (m0 >= K) break;
    // Aᵀ's entries: columns m0 + g (quad q) and m0 + g + 8 (quad q + 2) of the rows k + t (swizzle
    // 2t) and k + t + 4 (swizzle 2t + 1), k a multiple of 8.
    const int q = (m0 >> 2) + (l.g >> 2), within = l.g & 3;
    const int c00 = ((q ^ (2 * l.t)) << 2) + within, c01 = (((q + 2) ^ (2 * l.t)) << 2) + within;
    const int c10 = ((q ^ (2 * l.t + 1)) << 2) + within, c11 = (((q + 2) ^ (2 * l.t + 1)) << 2) + within;
#pragma unroll 2
    for (int k = 0; k < L; k += 8) {
      const float* yk = y + k * yp;
      Tf32<4> a;
      a.set(0, yk[c00]);
      a.set(1, yk[c01]);
      a.set(2, yk[4 * yp + c10]);
      a.set(3, yk[4 * yp + c11]);
#pragma unroll
      for (int n = 0; n < BV / 8; ++n) {
        Tf32<2> b;
        b.set(0, z[k * zp + 8 * n]);
        b.set(1, z[(k + 4) * zp + 8 * n]);
        mma(acc[m][n], a, b);
      }
    }
  }
}

// ---- the block's share of a pass ---------------------------------------------------------------

// Zeroes the block's shared memory (the padding rows and columns of every tile stay 0).
__device__ void zero_shared(float* shared, int64_t floats) {
  for (int64_t p = threadIdx.x; p < floats; p += kThreads) shared[p] = 0.0f;
}

struct Dims {
  int heads, K, V, slots;
};

// What a block of either pass works on: sequence seq = blockIdx.x, head blockIdx.y, the value
// columns e0.. (BVe ≤ BV of them) of tile blockIdx.z, the sequence's chunks begin..end, and its
// shared memory sm, zeroed before the chunk table is read.
template <int BV>
struct StateBlock {
  int64_t seq;
  int head, e0, H, K, V, BVe;
  SharedState sm;
  int64_t begin, end;
  __device__ StateBlock(float* shared, const Chunks& chunks, const Dims& dims)
      : seq(blockIdx.x),
        head(blockIdx.y),
        e0(blockIdx.z * BV),
        H(dims.heads),
        K(dims.K),
        V(dims.V),
        BVe(min(BV, V - e0)),
        sm(shared, K, BV) {
    zero_shared(shared, sm.ring + dims.slots * sm.slot_size - shared);
    __syncthreads();
    begin = chunks.seq_chunk[seq];
    end = chunks.seq_chunk[seq + 1];
  }
  // Starts staging the chunk's rows (`row` = its first token · H + head) of a [N, H, K] tensor into
  // the slot's row tile.
  __device__ void stage_rows(const float* from, int64_t row, const Span& s, int slot) const {
    stage_tile<kRowTileThreads>(from + row * K, int64_t{H} * K, s.len, K, sm.rows(slot), RowTileIndex{sm.rp});
  }
  // Starts staging the block's columns of the chunk's rows of a [N, H, V] tensor into the slot's
  // value tile.
  __device__ void stage_values(const float* from, int64_t row, const Span& s, int slot) const {
    stage_tile<kValueTileThreads<BV>>(from + row * V + e0, int64_t{H} * V, s.len, BVe, sm.values(slot),
                                      ValueTileIndex{value_tile_pitch(BV)});
  }
  // The block's head of state `index` in a stack [·, H, K, V] at `base`, or null without one.
  template <class T>
  __device__ T* state_at(T* base, int64_t index) const {
    return base ? base + (index * H + head) * static_cast<int64_t>(K) * V : nullptr;
  }
};

// ---- the state's way in and out --------------------------------------------------------------

// acc ← the block's tile (columns e0.. of [K, V] at `from`), or 0 without one.
template <int BV>
__device__ void load_state(StateRegisters<BV>& acc, const StateBlock<BV>& block, const float* from) {
  for_each_state_entry<BV>(acc, block.K, [&](int d, int e, float& v) {
    v = from && d < block.K && e < block.BVe ? from[static_cast<int64_t>(d) * block.V + block.e0 + e] : 0.0f;
  });
}

// The state copy in shared memory ← acc, and `to` (the block's columns e0.. of [K, V]; may be
// null) ← acc.
template <int BV>
__device__ void store_state(StateRegisters<BV>& acc, const StateBlock<BV>& block, float* to) {
  for_each_state_entry<BV>(acc, block.K, [&](int d, int e, float& v) {
    block.sm.S[d * block.sm.vp + e] = v;
    if (to && d < block.K && e < block.BVe) to[static_cast<int64_t>(d) * block.V + block.e0 + e] = v;
  });
}

// acc[d][·] *= γ_L[d] = exp(G_L[d]) (one G_L for a scalar decay).
template <int BV, ops::DecayKind kDecay>
__device__ void decay_state(StateRegisters<BV>& acc, const float* G_last, int K) {
  if constexpr (kDecay != ops::DecayKind::none) {
    for_each_state_entry<BV>(acc, K, [&](int d, int, float& v) {
      if (d < K) v *= expf(G_last[kDecay == ops::DecayKind::channel ? d : 0]);
    });
  }
}

// Stages G at the chunk's last row (K values per channel, one scalar) into the slot's decay row.
template <ops::DecayKind kDecay>
__device__ void stage_decays(const float* G, const Span& s, int heads, int head, int K, float* to) {
  if constexpr (kDecay != ops::DecayKind::none) {
    const int64_t last = (s.first + s.len - 1) * heads + head;
    if constexpr (kDecay == ops::DecayKind::channel) {
      stage_floats(G + last * K, K, to);
    } else {
      stage_floats(G + last, 1, to);
    }
  }
}

// ---- the two passes ----------------------------------------------------------------------------

// The first phase of a chunk in either pass, for the warp's rows below L (rows L.. of the slot's
// row tile X and value tile Z are 0, and so is R): with P = X S (S the state copy),
//   R = Z − P (kSign = −1)   or   R = Z + P (kSign = +1);
// R goes to `to` (the chunk's rows from `row` of [N·H, V], the block's columns) and −kSign·R to
// the tile Ut. Forward (−1): Ũ = U − W S, kept as Ũ for Kendᵀ Ũ.
// Backward (+1): dŨ += Kend dS, kept as −dŨ for the − Wᵀ dŨ term.
template <int kSign, int BV>
__device__ __forceinline__ void combine_rows_times_state(const StateBlock<BV>& block, int slot, const Span& s,
                                                         int64_t row, float* to) {
  static_assert(kSign == -1 || kSign == 1, "kSign is −1 or +1");
  if (16 * (static_cast<int>(threadIdx.x) / 32 % 4) >= s.len) return;
  const SharedState& sm = block.sm;
  const ValueTileIndex value_at{sm.vp};
  float product[BV / 16][4];
  rows_times_state<BV>(sm.rows(slot), sm.rp, sm.S, sm.vp, block.K, product);
  const float* Z = sm.values(slot);
  for_each_product_entry<BV>(product, [&](int i, int e, float p) {
    const float r = kSign < 0 ? Z[value_at(i, e)] - p : Z[value_at(i, e)] + p;
    sm.Ut[value_at(i, e)] = kSign < 0 ? r : -r;
    if (i < s.len && e < block.BVe) to[(row + int64_t{i} * block.H) * block.V + block.e0 + e] = r;
  });
}

template <ops::DecayKind kDecay, int BV>
__global__ void __launch_bounds__(kThreads, 1)
    state_forward_kernel(Chunks chunks, Workspace ws, Dims dims, const float* h0, float* ht) {
  extern __shared__ __align__(16) float shared[];
  const StateBlock<BV> block(shared, chunks, dims);
  const SharedState& sm = block.sm;
  StateRegisters<BV> acc;
  load_state<BV>(acc, block, block.state_at(h0, block.seq));
  store_state<BV>(acc, block,
                  block.begin < block.end ? block.state_at(ws.S, block.begin) : block.state_at(ht, block.seq));
  if (block.begin == block.end) return;
  // Phase 0 of a chunk: W and U; phase 1: Kend and G_L.
  run_phases(
      chunks, static_cast<int>(2 * (block.end - block.begin)), dims.slots, [&](int j) { return block.begin + j / 2; },
      [&](int j, int slot, const Span& s) {
        const int64_t row = s.first * block.H + block.head;
        if (j % 2 == 0) {
          block.stage_rows(ws.W, row, s, slot);
          block.stage_values(ws.U, row, s, slot);
        } else {
          block.stage_rows(ws.Kend, row, s, slot);
          stage_decays<kDecay>(ws.G, s, block.H, block.head, block.K, sm.decays(slot));
        }
      },
      [&](int j, int slot, const Span& s) {
        const int64_t row = s.first * block.H + block.head;
        if (j % 2 == 0) {
          combine_rows_times_state<-1, BV>(block, slot, s, row, ws.Ut);  // Ũ = U − W S
        } else {
          decay_state<BV, kDecay>(acc, sm.decays(slot), block.K);
          add_transposed_product<BV>(acc, sm.rows(slot), sm.rp, sm.Ut, sm.vp, s.len, block.K);
          const int64_t chunk = block.begin + j / 2;
          store_state<BV>(acc, block,
                          chunk + 1 < block.end ? block.state_at(ws.S, chunk + 1) : block.state_at(ht, block.seq));
        }
      });
}

template <ops::DecayKind kDecay, int BV>
__global__ void __launch_bounds__(kThreads, 1)
    state_backward_kernel(Chunks chunks, Workspace ws, Dims dims, const float* d_o, const float* dht, GradWorkspace gws,
                          float* dh0) {
  extern __shared__ __align__(16) float shared[];
  const StateBlock<BV> block(shared, chunks, dims);
  const SharedState& sm = block.sm;  // S holds dS, Ut holds −dŨ
  StateRegisters<BV> acc;
  load_state<BV>(acc, block, block.state_at(dht, block.seq));
  store_state<BV>(acc, block,
                  block.begin < block.end ? block.state_at(gws.dS, block.end - 1) : block.state_at(dh0, block.seq));
  if (block.begin == block.end) return;
  // Phase 0 of a chunk: Kend and dŨ; phase 1: Qg, dO and G_L; with the write error, phase 2:
  // KgNeg and dR; last: W.
  enum Phase { kCombine, kOutput, kWriteError, kWritten };
  const int per_chunk = gws.dR ? 4 : 3;
  const auto phase_of = [&](int j) {
    const int p = j % per_chunk;
    return p == per_chunk - 1 ? kWritten : static_cast<Phase>(p);
  };
  run_phases(
      chunks, static_cast<int>(per_chunk * (block.end - block.begin)), dims.slots,
      [&](int j) { return block.end - 1 - j / per_chunk; },
      [&](int j, int slot, const Span& s) {
        const int64_t row = s.first * block.H + block.head;
        switch (phase_of(j)) {
          case kCombine:
            block.stage_rows(ws.Kend, row, s, slot);
            block.stage_values(gws.dUt, row, s, slot);
            break;
          case kOutput:
            block.stage_rows(ws.Qg, row, s, slot);
            block.stage_values(d_o, row, s, slot);
            stage_decays<kDecay>(ws.G, s, block.H, block.head, block.K, sm.decays(slot));
            break;
          case kWriteError:
            block.stage_rows(gws.KgNeg, row, s, slot);
            block.stage_values(gws.dR, row, s, slot);
            break;
          case kWritten: block.stage_rows(ws.W, row, s, slot); break;
        }
      },
      [&](int j, int slot, const Span& s) {
        const int64_t row = s.first * block.H + block.head;
        const Phase phase = phase_of(j);
        if (phase == kCombine) {
          combine_rows_times_state<+1, BV>(block, slot, s, row, gws.dUt);  // dŨ += Kend dS
        } else if (phase == kOutput) {
          decay_state<BV, kDecay>(acc, sm.decays(slot), block.K);
          add_transposed_product<BV>(acc, sm.rows(slot), sm.rp, sm.values(slot), sm.vp, s.len, block.K);
        } else if (phase == kWriteError) {
          add_transposed_product<BV>(acc, sm.rows(slot), sm.rp, sm.values(slot), sm.vp, s.len, block.K);
        } else {
          add_transposed_product<BV>(acc, sm.rows(slot), sm.rp, sm.Ut, sm.vp, s.len, block.K);
          const int64_t chunk = block.end - 1 - j / per_chunk;
          store_state<BV>(acc, block,
                          chunk > block.begin ? block.state_at(gws.dS, chunk - 1) : block.state_at(dh0, block.seq));
        }
      });
}

// The value tile and ring size of a call: the widest tile that takes K and whose grid fills the
// device (else the narrowest), with as many ring slots as shared memory holds.
struct Tiling {
  int value_tile, slots;
  size_t bytes;
};

Tiling choose_tiling(const Call& call) {
  int device = 0, limit = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "cudaDeviceGetAttribute(shared memory per block)");
  const size_t budget = static_cast<size_t>(limit) - 1024;  // beside the static shared memory
  const int64_t pairs = call.chunks.seqs * call.heads;
  const auto tiling = [&](int BV) {
    int slots = kMinSlots;
    while (slots < kMaxSlots && state_shared_bytes(call.key_dim, BV, slots + 1) <= budget) ++slots;
    return Tiling{BV, slots, state_shared_bytes(call.key_dim, BV, slots)};
  };
  for (int BV : kTileWidths) {
    if (call.key_dim <= max_key_dim(BV) && state_shared_bytes(call.key_dim, BV, kMinSlots) <= budget &&
        pairs * ceil_div(call.value_dim, BV) >= multiprocessor_count()) {
      return tiling(BV);
    }
  }
  return tiling(std::end(kTileWidths)[-1]);
}

// fn(std::integral_constant<int, BV>{}) for the tile width BV.
template <class Fn>
void dispatch_tile(int BV, Fn&& fn) {
  if (BV == 64) return fn(std::integral_constant<int, 64>{});
  if (BV == 32) return fn(std::integral_constant<int, 32>{});
  fn(std::integral_constant<int, 16>{});
}

dim3 state_grid(const Call& call, int BV) {
  return dim3(static_cast<unsigned>(call.chunks.seqs), static_cast<unsigned>(call.heads),
              static_cast<unsigned>(ceil_div(call.value_dim, BV)));
}

}  // namespace

void state_forward(const Call& call, const Workspace& ws, const float* h0, float* ht) {
  if (call.chunks.seqs == 0) return;
  const Tiling tiling = choose_tiling(call);
  const Dims dims{call.heads, call.key_dim, call.value_dim, tiling.slots};
  // The gate kind does not enter the state passes.
  dispatch_kinds(call, [&](auto decay, auto /*gate*/) {
    dispatch_tile(tiling.value_tile, [&](auto tile) {
      const auto kernel = state_forward_kernel<decltype(decay)::value, decltype(tile)::value>;
      allow_shared_memory(reinterpret_cast<const void*>(kernel), tiling.bytes);
      kernel<<<state_grid(call, tile), kThreads, tiling.bytes>>>(call.chunks, ws, dims, h0, ht);
      check_launch("delta_rule state_forward_kernel");
    });
  });
}

void state_backward(const Call& call, const Workspace& ws, const void* d_o, const float* dht, const GradWorkspace& gws,
                    float* dh0) {
  if (call.chunks.seqs == 0) return;
  const Tiling tiling = choose_tiling(call);
  const Dims dims{call.heads, call.key_dim, call.value_dim, tiling.slots};
  dispatch_kinds(call, [&](auto decay, auto /*gate*/) {
    dispatch_tile(tiling.value_tile, [&](auto tile) {
      const auto kernel = state_backward_kernel<decltype(decay)::value, decltype(tile)::value>;
      allow_shared_memory(reinterpret_cast<const void*>(kernel), tiling.bytes);
      kernel<<<state_grid(call, tile), kThreads, tiling.bytes>>>(call.chunks, ws, dims, static_cast<const float*>(d_o),
                                                                 dht, gws, dh0);
      check_launch("delta_rule state_backward_kernel");
    });
  });
}

}  // namespace linea::cuda::delta
