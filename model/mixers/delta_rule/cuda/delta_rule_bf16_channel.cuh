// A decay per key channel (KDA, GDN-2, the plain write's GLA, HGRN-2 and RWKV-6) inside a chunk,
// for the bf16 pipeline's products (model/mixers/delta_rule/cuda/delta_rule_bf16.cuh). Sums over
// the channels d of decayed products, such as A_ij = Σ_d x_id k_jd e_ijd with
// e_ijd = exp(R_id − G_jd) (j < i, or j ≤ i), are no product of two matrices. R is the query
// side's decay: R = G, or with a shift of 1 (RWKV-6, whose readout reads the state before the
// token's write) R_i = G_{i−1}, R_0 = 0. By blocks of 16 rows (I = 0..3: rows n = 16 I to
// r = 16 I + 15), for a row i of block I:
//   sums over rows j ≤ r (row sums):     e_ijd = exp(R_id − R_nd) · exp(R_nd − G_jd)
//   sums over rows m ≥ n (column sums):  e_mid = exp(R_md − G_rd) · exp(G_rd − G_id)
// The factor on i's side is ≤ 1 ("near" factor); the other is ≤ 1 on the rows outside block I (the
// pairs' j < n, resp. m > r: R_n ≤ G_j and R_m ≤ G_r there, G falling along the chunk) and at most
// exp(range_Id) on its own rows, range_Id = R_nd − G_rd (channel d's decay across the block; one
// row wider with the shift). So such a sum is one product of the matrix with a row-rescaled copy
// of the other operand (one copy per block I: its "reach" operand), times the near factor: bf16
// roundings only, no overflow or underflow, wherever range_Id ≤ kMaxRange. A channel whose range
// exceeds that is "steep" for the block: its entries on block I's own rows are zero in block I's
// reach operand, and the kernels sum those pairs one by one (for_steep) with exp(R_id − G_jd).
// With a shift of 0 every formula is the after-write one (R = G): KDA, GDN-2 and the plain write's
// after-write calls instantiate exactly that.
//
// Tiles: G of the chunk's rows for Kt key columns (f32, rows ≥ L hold G_{L−1}; row pitch Kt + 8, so
// that the 8 rows × 4 column pairs of a fragment fall in distinct banks), the steep bits per block,
// and the reach operands: row reach of block I = rows 0 .. r (16 (I + 1) rows), column reach of
// block I = rows n .. 63 (64 − 16 I rows), 160 rows each for the four blocks.
#pragma once
#include "model/mixers/delta_rule/cuda/delta_rule_bf16.cuh"

namespace linea::cuda::delta::bf16path::channel {

inline constexpr int kBlock = 16, kBlocks = kC / kBlock;
inline constexpr float kMaxRange = 60.0f;  // exp(60) ≈ 1e26: far from the f32 and bf16 limits
inline constexpr int kReachRows = 160;

// kShift: the query side's decay R_i = G_{i − kShift} (0 or 1; R_0 = 0 with 1).
template <int Kt, int kShift = 0>
struct DecayTile {
  static_assert(kShift == 0 || kShift == 1, "the readout reads S_t or S_{t−1}");
  static constexpr int kPitch = Kt + 8;
  static constexpr size_t kBytes = sizeof(float) * kC * kPitch;
  float* G;         // [kC][kPitch]
  uint32_t* steep;  // [kBlocks][Kt / 32]: bit d % 32 of word d / 32 for channel d

  __device__ float at(int i, int d) const { return G[i * kPitch + d]; }
  // R_id: G_id, or with the shift G_{i−1,d} (0 for i = 0).
  __device__ float readout(int i, int d) const {
    if constexpr (kShift == 0) {
      return at(i, d);
    } else {
      return i == 0 ? 0.0f : at(i - 1, d);
    }
  }
  __device__ bool is_steep(int block, int d) const { return (steep[block * (Kt / 32) + d / 32] >> (d % 32)) & 1u; }

  // G_id = Σ_{s≤i} g_sd for the chunk's rows and key columns col0 + d (d < Kt; 0 past K), from g
  // [N, H, K]; the steep bits (R_n − G_r > kMaxRange); G_{L−1} to last[col0 + d] when last is not
  // null. Threads d < Kt each sum one column (whole warps: Kt is a multiple of 32). Synchronise
  // before reading.
  __device__ void load(const float* g, const Span& s, int heads, int head, int K, int col0, float* last) const {
    const int d = threadIdx.x;
    if (d >= Kt) return;
    const bool inside = col0 + d < K;
    const float* from = g + (s.first * heads + head) * static_cast<int64_t>(K) + col0 + d;
    const int64_t stride = static_cast<int64_t>(heads) * K;
    float sum = 0.0f;
#pragma unroll 8
    for (int i = 0; i < kC; ++i) {
      if (inside && i < s.len) sum += from[i * stride];
      G[i * kPitch + d] = sum;
    }
    if (last && inside) last[col0 + d] = sum;
    for (int block = 0; block < kBlocks; ++block) {
      const int n = block * kBlock;
      const bool steep_here = n < s.len && readout(n, d) - G[(n + kBlock - 1) * kPitch + d] > kMaxRange;
      const uint32_t bits = __ballot_sync(0xffffffffu, steep_here);
      if (mma::lane_id() == 0) steep[block * (Kt / 32) + d / 32] = bits;
    }
  }
};

// fn(d) for the channels d steep in `block`, in increasing order.
template <int Kt, int kShift, class Fn>
__device__ __forceinline__ void for_steep(const DecayTile<Kt, kShift>& dt, int block, Fn fn) {
  for (int word = 0; word < Kt / 32; ++word) {
    for (uint32_t bits = dt.steep[block * (Kt / 32) + word]; bits; bits &= bits - 1) fn(32 * word + __ffs(bits) - 1);
  }
}

// The near factors of row i (block i / 16) and channel d: exp(R_i − R_n), exp(G_r − G_i).
template <int Kt, int kShift>
__device__ __forceinline__ float row_near(const DecayTile<Kt, kShift>& dt, int i, int d) {
  return expf(dt.readout(i, d) - dt.readout(i - i % kBlock, d));
}
template <int Kt, int kShift>
__device__ __forceinline__ float column_near(const DecayTile<Kt, kShift>& dt, int i, int d) {
  return expf(dt.at(i - i % kBlock + kBlock - 1, d) - dt.at(i, d));
}

// Block I's reach operands within a region of kReachRows rows: the tile whose row j is operand row j.
template <int Kt>
__device__ __forceinline__ Tile<Kt> row_reach(bf16* region, int block) {
  return {region + 8 * block * (block + 1) * Kt};
}
template <int Kt>
__device__ __forceinline__ Tile<Kt> column_reach(bf16* region, int block) {
  return {region + (56 * block - 8 * block * block) * Kt};  // rows before block I's: Σ (64 − 16 I') − 16 I
}

// Fills the row reach operands: row j of block I's = x(j, d) exp(R_nd − G_jd) (j ≤ r; 0 on block I's
// rows where d is steep); x(i, d) gives operand entries as floats. 8 columns a thread at a time.
template <int Kt, int kShift, class X>
__device__ void fill_row_reach(bf16* region, const DecayTile<Kt, kShift>& dt, X x) {
  constexpr int kPieces = Kt / 8;
  for (int p = threadIdx.x; p < kReachRows * kPieces; p += blockDim.x) {
    const int row = p / kPieces, c = 8 * (p % kPieces);
    const int block = row < 16 ? 0 : row < 48 ? 1 : row < 96 ? 2 : 3;
    const int j = row - 8 * block * (block + 1), n = block * kBlock;
    uint32_t packed[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      float v[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int d = c + 2 * q + h;
        v[h] = j >= n && dt.is_steep(block, d) ? 0.0f : x(j, d) * expf(dt.readout(n, d) - dt.at(j, d));
      }
      packed[q] = mma::pack(v[0], v[1]);
    }
    *reinterpret_cast<uint4*>(row_reach<Kt>(region, block).at(j, c)) = *reinterpret_cast<const uint4*>(packed);
  }
}

// Fills the column reach operands: row m of block I's = x(m, d) exp(R_md − G_rd) (m ≥ n; 0 on block
// I's rows where d is steep).
template <int Kt, int kShift, class X>
__device__ void fill_column_reach(bf16* region, const DecayTile<Kt, kShift>& dt, X x) {
  constexpr int kPieces = Kt / 8;
  for (int p = threadIdx.x; p < kReachRows * kPieces; p += blockDim.x) {
    const int row = p / kPieces, c = 8 * (p % kPieces);
    const int block = row < 64 ? 0 : row < 112 ? 1 : row < 144 ? 2 : 3;
    const int m = row - (56 * block - 8 * block * block), r = block * kBlock + kBlock - 1;
    uint32_t packed[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      float v[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int d = c + 2 * q + h;
        v[h] = m <= r && dt.is_steep(block, d) ? 0.0f : x(m, d) * expf(dt.readout(m, d) - dt.at(r, d));
      }
      packed[q] = mma::pack(v[0], v[1]);
    }
    *reinterpret_cast<uint4*>(column_reach<Kt>(region, block).at(m, c)) = *reinterpret_cast<const uint4*>(packed);
  }
}

}  // namespace linea::cuda::delta::bf16path::channel
