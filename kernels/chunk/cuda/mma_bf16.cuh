// Warp-level bf16 tensor-core products for the chunked kernels: mma.sync m16n8k16 (bf16 operands,
// f32 accumulators) on operand tiles in shared memory, read by ldmatrix, filled by cp.async. The
// instruction wrappers (copy16, ldsm_x4, mma, pack) serve the flash attention kernels too.
//
// Tiles. Tile<C> is a row-major bf16 matrix of C columns (C a multiple of 64) in shared memory whose
// 16-byte chunks are permuted within each row: chunk c of row r sits at chunk c ^ (r % 8). An
// ldmatrix reads 8 rows × 16 bytes at one column chunk; the permutation puts those 8 pieces in 8
// different groups of 4 banks, so neither ldmatrix nor the 16-byte cp.async writes conflict, and
// 4-byte writes of result fragments (8 rows × 4 consecutive words) do not either.
//
// Fragments (PTX ISA, mma.m16n8k16 with .bf16; lane = 4g + t, g = lane / 4, t = lane % 4):
//   A (16×16, row-major): a[0] = (g, 2t..2t+1), a[1] = (g+8, 2t..), a[2] = (g, 2t+8..), a[3] = (g+8, 2t+8..)
//   B (16×8):             b[0] = (k 2t..2t+1, n g), b[1] = (k 2t+8..2t+9, n g)
//   C (16×8, f32):        c[0..1] = (g, 2t..2t+1), c[2..3] = (g+8, 2t..2t+1)
// (each 32-bit register holds two bf16, the lower column or row in the low half). The loaders name
// how the tile holds the operand: a_mk (tile row = m: A as it is), a_km (tile row = k: the tile is
// Aᵀ), b_kn (tile row = k: B as it is), b_nk (tile row = n: the tile is Bᵀ).
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

namespace linea::cuda::mma {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ int lane_id() { return static_cast<int>(threadIdx.x) & 31; }

template <int C>
struct Tile {
  static_assert(C % 64 == 0, "a tile row is a multiple of 8 chunks of 16 bytes");
  bf16* data;
  __device__ bf16* at(int r, int c) const { return data + r * C + ((((c >> 3) ^ (r & 7)) << 3) | (c & 7)); }
};

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes from global to shared memory, asynchronously; zeros instead when !valid (no read).
// `to` a shared address (shared_address) or a pointer into shared memory.
__device__ __forceinline__ void copy16(uint32_t to, const void* from, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(to), "l"(from), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void copy16(void* to, const void* from, bool valid) {
  copy16(shared_address(to), from, valid);
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most `kPending` of the thread's committed copy groups are still in flight.
template <int kPending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// ldmatrix at a shared address (shared_address) or a pointer into shared memory.
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const bf16* p) { ldsm_x4(r, shared_address(p)); }
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const bf16* p) { ldsm_x4_trans(r, shared_address(p)); }

// A fragment of rows m0.., depth k0.. . Lane 8j + r addresses row r of the 8×8 block j (j = 0: rows
// m0.., columns k0..; 1: m0 + 8..; 2: k0 + 8..; 3: both), which ldmatrix hands to a[j].
template <int C>
__device__ __forceinline__ void a_mk(uint32_t (&a)[4], const Tile<C>& t, int m0, int k0) {
  const int l = lane_id();
  ldsm_x4(a, t.at(m0 + (l & 7) + ((l >> 3) & 1) * 8, k0 + (l >> 4) * 8));
}
// The same from a tile that holds Aᵀ (row k, column m): the blocks are read transposed.
template <int C>
__device__ __forceinline__ void a_km(uint32_t (&a)[4], const Tile<C>& t, int m0, int k0) {
  const int l = lane_id();
  ldsm_x4_trans(a, t.at(k0 + (l & 7) + (l >> 4) * 8, m0 + ((l >> 3) & 1) * 8));
}
// B fragments of the two n-tiles n0.. and n0 + 8.., depth k0.., into b[0] and b[1].
template <int C>
__device__ __forceinline__ void b_kn(uint32_t (&b)[2][2], const Tile<C>& t, int k0, int n0) {
  const int l = lane_id();
  uint32_t r[4];
  ldsm_x4_trans(r, t.at(k0 + (l & 7) + ((l >> 3) & 1) * 8, n0 + (l >> 4) * 8));
  b[0][0] = r[0], b[0][1] = r[1], b[1][0] = r[2], b[1][1] = r[3];
}
template <int C>
__device__ __forceinline__ void b_nk(uint32_t (&b)[2][2], const Tile<C>& t, int k0, int n0) {
  const int l = lane_id();
  uint32_t r[4];
  ldsm_x4(r, t.at(n0 + (l & 7) + (l >> 4) * 8, k0 + ((l >> 3) & 1) * 8));
  b[0][0] = r[0], b[0][1] = r[1], b[1][0] = r[2], b[1][1] = r[3];
}

// d += a b on one 16×8×16 tile (b given as its two registers, or as a fragment).
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  mma(d, a, b[0], b[1]);
}

// Two floats as a bf16 pair (round to nearest even), `lo` in the low half.
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ __forceinline__ float2 unpack(uint32_t v) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
}

// The entries of a C fragment at (m0, n0): entry r is at row m0 + g + 8 (r / 2), column
// n0 + 2t + r % 2. fn(row, column, c[r], c[r + 1]) for the two pairs of adjacent columns.
template <class Fn>
__device__ __forceinline__ void for_pairs(float (&c)[4], int m0, int n0, Fn fn) {
  const int l = lane_id(), row = m0 + (l >> 2), col = n0 + 2 * (l & 3);
  fn(row, col, c[0], c[1]);
  fn(row + 8, col, c[2], c[3]);
}

// fn(row, column, r) for the 4 entries r of a C fragment at (m0, n0).
template <class Fn>
__device__ __forceinline__ void for_entries(int m0, int n0, Fn fn) {
  const int l = lane_id();
#pragma unroll
  for (int r = 0; r < 4; ++r) fn(m0 + (l >> 2) + 8 * (r >> 1), n0 + 2 * (l & 3) + (r & 1), r);
}

// ---- addresses computed once ------------------------------------------------------------------
// A lane's place in a Tile<C>: the byte offset in the tile of its entry (row, col) (col a multiple of
// 8 for an ldmatrix row, even for a fragment pair). Entries (row + r0, col + c0) with r0 % 8 == 0,
// c0 % 8 == 0 and no bit of c0 % 64 in common with col % 64 (bits 3..5) lie at at(r0, c0): the
// swizzle (chunk ^ row % 8) keeps its row term and changes by c0's chunk bits alone, and whole rows
// and 64-column blocks add, so with r0 and c0 known at compile time an address costs at most one
// XOR (none when c0 % 64 == 0) and an immediate offset. Tiles start 128-byte aligned, so the offset
// of one lane is the same for every tile of C columns read the same way.
template <int C>
struct TileLane {
  uint32_t off;
  __device__ TileLane(int row, int col) : off(2 * ((((col >> 3) ^ (row & 7)) << 3) | (col & 7)) + 2 * C * row) {
    static_assert(C % 64 == 0, "a tile row is a multiple of 8 chunks of 16 bytes");
  }
  __device__ uint32_t at(int r0, int c0) const {
    return (off ^ static_cast<uint32_t>((c0 & 56) << 1)) + static_cast<uint32_t>(2 * (r0 * C + (c0 >> 6) * 64));
  }
};
// The lanes of the loaders above, at offsets (0, 0): a_mk(t, m0, k) reads at(0, k) of a_mk_lane(m0);
// a_km(t, m0, k) at(k, 0) of a_km_lane(m0); b_kn(t, k, n0 + 8j) at(k, 8j) of b_kn_lane(n0);
// b_nk(t, k, n0 + 8j) at(8j, k) of b_nk_lane(n0); a C fragment's pair of rows m0 + 8r at(8r, 8n) of
// c_lane(m0, n0) (columns n0 + 8n). l: the lane.
template <int C>
__device__ __forceinline__ TileLane<C> a_mk_lane(int m0, int l = lane_id()) {
  return {m0 + (l & 7) + ((l >> 3) & 1) * 8, (l >> 4) * 8};
}
template <int C>
__device__ __forceinline__ TileLane<C> a_km_lane(int m0, int l = lane_id()) {
  return {(l & 7) + (l >> 4) * 8, m0 + ((l >> 3) & 1) * 8};
}
template <int C>
__device__ __forceinline__ TileLane<C> b_kn_lane(int n0, int l = lane_id()) {
  return {(l & 7) + ((l >> 3) & 1) * 8, n0 + (l >> 4) * 8};
}
template <int C>
__device__ __forceinline__ TileLane<C> b_nk_lane(int n0, int l = lane_id()) {
  return {n0 + (l & 7) + (l >> 4) * 8, ((l >> 3) & 1) * 8};
}
template <int C>
__device__ __forceinline__ TileLane<C> c_lane(int m0, int n0, int l = lane_id()) {
  return {m0 + (l >> 2), n0 + 2 * (l & 3)};
}

// The tile's entry at byte offset `off`, as a 4-byte pair or a 16-byte piece.
template <int C>
__device__ __forceinline__ uint32_t& word_at(const Tile<C>& t, uint32_t off) {
  return *reinterpret_cast<uint32_t*>(reinterpret_cast<unsigned char*>(t.data) + off);
}
template <int C>
__device__ __forceinline__ uint4& piece_at(const Tile<C>& t, uint32_t off) {
  return *reinterpret_cast<uint4*>(reinterpret_cast<unsigned char*>(t.data) + off);
}
template <int C>
__device__ __forceinline__ uint32_t address_at(const Tile<C>& t, uint32_t off) {
  return shared_address(t.data) + off;
}

// How a tile holds a product's operand: as it is (A: row m; B: row k) or transposed (A: row k;
// B: row n).
enum class Hold { as_is, transposed };

// acc (the row tile m0.., N column tiles n0..) += A B over depth [k_begin, k_begin + depth), a
// multiple of 16: A read by a_mk or a_km, B by b_kn or b_nk, as kA and kB say.

template <Hold kA, Hold kB, int N, int CA, int CB>
__device__ __forceinline__ void product(float (&acc)[N][4], const Tile<CA>& a, int m0, const Tile<CB>& b, int n0,
                                        int depth, int k_begin = 0) {
  static_assert(N % 2 == 0, "column tiles come in pairs");
#pragma unroll 2
  for (int k = k_begin; k < k_begin + depth; k += 16) {
    uint32_t af[4];
    if constexpr (kA == Hold::as_is) {
      a_mk(af, a, m0, k);
    } else {
      a_km(af, a, m0, k);
    }
#pragma unroll
    for (int j = 0; j < N; j += 2) {
      uint32_t bf[2][2];
      if constexpr (kB == Hold::as_is) {
        b_kn(bf, b, k, n0 + 8 * j);
      } else {
        b_nk(bf, b, k, n0 + 8 * j);
      }
      mma(acc[j], af, bf[0]);
      mma(acc[j + 1], af, bf[1]);
    }
  }
}

// acc (N column tiles) += A B over depth [0, kDepth), in depth order: A's fragments at a.at(0, k)
// (kA as_is, lane a_mk_lane) or a.at(k, 0) (transposed, a_km_lane) of tile ta, B's at b.at(k, 8j)
// (as_is, b_kn_lane) or b.at(8j, k) (transposed, b_nk_lane) of tile tb. The same products in the
// same order as product() below.
template <Hold kA, Hold kB, int kDepth, int N, int CA, int CB>
__device__ __forceinline__ void product_at(float (&acc)[N][4], const Tile<CA>& ta, const TileLane<CA>& a,
                                           const Tile<CB>& tb, const TileLane<CB>& b) {
  static_assert(N % 2 == 0 && kDepth % 16 == 0, "column tiles come in pairs, depth in steps of 16");
  const uint32_t sa = shared_address(ta.data), sb = shared_address(tb.data);
#pragma unroll
  for (int k = 0; k < kDepth; k += 16) {
    uint32_t af[4];
    if constexpr (kA == Hold::as_is) {
      ldsm_x4(af, sa + a.at(0, k));
    } else {
      ldsm_x4_trans(af, sa + a.at(k, 0));
    }
#pragma unroll
    for (int j = 0; j < N; j += 2) {
      uint32_t r[4];
      if constexpr (kB == Hold::as_is) {
        ldsm_x4_trans(r, sb + b.at(k, 8 * j));
      } else {
        ldsm_x4(r, sb + b.at(8 * j, k));
      }
      mma(acc[j], af, r[0], r[1]);
      mma(acc[j + 1], af, r[2], r[3]);
    }
  }
}

}  // namespace linea::cuda::mma
