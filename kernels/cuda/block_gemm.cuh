// block_gemm: one thread block of 256 threads computes C = A·B for A of M ≤ 64 rows, B of N
// columns and depth D, with the operands given as functions: a(m, k) and b(k, n) are called only
// inside the bounds (m < M, k < D, n < N; M, N, D ≥ 1), and store(m, n, c) receives every result
// once.
//
// For each block of 64 columns, tiles of depth 32 of A and B go through shared memory and the 8
// warps multiply them on the tensor cores (WMMA m16n16k8 TF32, each warp a 16×32 piece of the
// 64×64 result). The next tile's loads are issued before the current tile is multiplied, so their
// latency hides behind the tensor-core work (also across the column blocks: the next block's first
// tile loads while this one's results are stored).
// Precision: by default an operand is split, x = big + small with big = tf32(x) and small =
// tf32(x − big), and big·big + big·small + small·big is accumulated in f32 ("3×TF32"): the product
// stays within a few f32 roundings of the exact one. gemm::a_tf32 / b_tf32 round the
// operand to TF32 once instead: exact for values that are TF32 numbers already (bf16 operands
// passed through unchanged: then the product loses nothing and costs one or two passes, not three),
// 11 significant bits otherwise (for results rounded to bf16 right away). The sums run in a fixed
// order.
// gemm::a_m_fast / b_k_fast say which index neighbouring threads vary when loading a tile (by
// default k for A, n for B: coalesced for row-major A and B); pass them for a transposed operand. Every
// thread of the block must call it with the same arguments; it synchronises the block before
// returning, but store()'s writes need a __syncthreads() before other threads read them.
#pragma once
#include <cuda_bf16.h>
#include <mma.h>

#include <type_traits>

namespace linea::cuda {

inline constexpr int kBlockGemmThreads = 256;

// block_gemm's options, or-ed together (0: A and B loaded with k and n fast, both split).
namespace gemm {
enum Option : unsigned {
  a_m_fast = 1,  // load A with m fast (coalesced for a transposed, column-major A); else k fast
  b_k_fast = 2,  // load B with k fast (coalesced for a transposed B); else n fast
  a_tf32 = 4,    // A rounded to TF32 once instead of split in two
  b_tf32 = 8,
};
constexpr unsigned a_tf32_if(bool yes) { return yes ? a_tf32 : 0u; }
constexpr unsigned b_tf32_if(bool yes) { return yes ? b_tf32 : 0u; }
}  // namespace gemm

// Whether every value of storage type E is a TF32 number (bf16's are): such an operand, passed
// through unchanged, can take a_tf32 / b_tf32 at no cost in accuracy.
template <class E>
inline constexpr bool kTf32Exact = std::is_same_v<E, __nv_bfloat16>;

struct alignas(128) BlockGemmTiles {
  static constexpr int kRows = 64, kDepth = 32, kPitch = kRows + 4, kDepthPitch = kDepth + 4;
  static constexpr int kTileFloats = kRows * kDepthPitch;  // ≥ kDepth · kPitch
  union {
    struct {
      float a[kTileFloats];
      float b[kTileFloats];
    } in;
    float c[kRows][kPitch];  // the 64×64 result, row-major
  };
};

namespace block_gemm_detail {
namespace wmma = nvcuda::wmma;

// Rounds a loaded fragment x to big = tf32(x) (in place) and, when kSplit, small = tf32(x − big).
template <bool kSplit, class Fragment>
__device__ __forceinline__ void round_tf32(Fragment& big, Fragment& small) {
#pragma unroll
  for (int i = 0; i < big.num_elements; ++i) {
    const float x = big.x[i];
    big.x[i] = wmma::__float_to_tf32(x);
    if constexpr (kSplit) small.x[i] = wmma::__float_to_tf32(x - big.x[i]);
  }
}
}  // namespace block_gemm_detail

template <unsigned kOptions = 0, class FA, class FB, class FS>
__device__ void block_gemm(int M, int N, int D, FA a, FB b, FS store, BlockGemmTiles& t) {
  namespace wmma = nvcuda::wmma;
  namespace detail = block_gemm_detail;
  constexpr int R = BlockGemmTiles::kRows, KD = BlockGemmTiles::kDepth, P = BlockGemmTiles::kPitch,
                DP = BlockGemmTiles::kDepthPitch;
  constexpr int kPerThread = KD * R / kBlockGemmThreads;  // tile entries of A (and of B) per thread
  constexpr bool kAK = !(kOptions & gemm::a_m_fast), kBN = !(kOptions & gemm::b_k_fast);
  constexpr bool kSplitA = !(kOptions & gemm::a_tf32), kSplitB = !(kOptions & gemm::b_tf32);
  using LayoutA = std::conditional_t<kAK, wmma::row_major, wmma::col_major>;
  using LayoutB = std::conditional_t<kBN, wmma::row_major, wmma::col_major>;
  using FragmentA = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, LayoutA>;
  using FragmentB = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, LayoutB>;
  using Accumulator = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;
  // Where tile entries A(m, k) and B(k, n) live in shared memory.
  const auto a_at = [&](int m, int k) { return kAK ? m * DP + k : k * P + m; };
  const auto b_at = [&](int k, int n) { return kBN ? k * P + n : n * DP + k; };
  constexpr int kLeadA = kAK ? DP : P, kLeadB = kBN ? P : DP;
  const int warp = threadIdx.x / 32;
  const int wm = (warp % 4) * 16, wn = (warp / 4) * 32;  // the warp's piece: rows wm.., columns wn..
  const int depth_tiles = (D + KD - 1) / KD, tiles = (N + R - 1) / R * depth_tiles;

  // Entry r of this thread's share of a tile: (m, k) of A and (k, n) of B.
  const auto a_entry = [&](int r, int& m, int& k) {
    const int p = threadIdx.x + r * kBlockGemmThreads;
    m = kAK ? p / KD : p % R;
    k = kAK ? p % KD : p / R;
  };
  const auto b_entry = [&](int r, int& k, int& n) {
    const int p = threadIdx.x + r * kBlockGemmThreads;
    n = kBN ? p % R : p / KD;
    k = kBN ? p / R : p % KD;
  };
  // Tile s (column block s / depth_tiles, depth tile s % depth_tiles) into registers. Out-of-range
  // entries read a clamped, valid entry and keep 0: no branch around the loads, so they issue
  // together.
  float staged_a[kPerThread], staged_b[kPerThread];
  const auto load = [&](int s) {
    const int n0 = s / depth_tiles * R, k0 = s % depth_tiles * KD;
#pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      int m, k, n;
      a_entry(r, m, k);
      const float av = a(min(m, M - 1), min(k0 + k, D - 1));
      staged_a[r] = m < M && k0 + k < D ? av : 0.0f;
      b_entry(r, k, n);
      const float bv = b(min(k0 + k, D - 1), min(n0 + n, N - 1));
      staged_b[r] = n0 + n < N && k0 + k < D ? bv : 0.0f;
    }
  };

  Accumulator acc[2];
  load(0);
  for (int s = 0; s < tiles; ++s) {
    const int n0 = s / depth_tiles * R;
    if (s % depth_tiles == 0) {
      wmma::fill_fragment(acc[0], 0.0f);
      wmma::fill_fragment(acc[1], 0.0f);
    }
#pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      int m, k, n;
      a_entry(r, m, k);
      t.in.a[a_at(m, k)] = staged_a[r];
      b_entry(r, k, n);
      t.in.b[b_at(k, n)] = staged_b[r];
    }
    __syncthreads();
    if (s + 1 < tiles) load(s + 1);
#pragma unroll
    for (int k = 0; k < KD; k += 8) {
      FragmentA a_big, a_small;
      wmma::load_matrix_sync(a_big, &t.in.a[a_at(wm, k)], kLeadA);
      detail::round_tf32<kSplitA>(a_big, a_small);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        FragmentB b_big, b_small;
        wmma::load_matrix_sync(b_big, &t.in.b[b_at(k, wn + 16 * j)], kLeadB);
        detail::round_tf32<kSplitB>(b_big, b_small);
        if constexpr (kSplitA) wmma::mma_sync(acc[j], a_small, b_big, acc[j]);
        if constexpr (kSplitB) wmma::mma_sync(acc[j], a_big, b_small, acc[j]);
        wmma::mma_sync(acc[j], a_big, b_big, acc[j]);
      }
    }
    __syncthreads();
    if (s % depth_tiles == depth_tiles - 1) {
      wmma::store_matrix_sync(&t.c[wm][wn], acc[0], P, wmma::mem_row_major);
      wmma::store_matrix_sync(&t.c[wm][wn + 16], acc[1], P, wmma::mem_row_major);
      __syncthreads();
#pragma unroll 4
      for (int p = threadIdx.x; p < R * R; p += kBlockGemmThreads) {
        const int m = p / R, n = p % R;
        if (m < M && n0 + n < N) store(m, n0 + n, t.c[m][n]);
      }
      __syncthreads();
    }
  }
}

}  // namespace linea::cuda
