// block_gemm: one thread block of 256 threads computes C = A·B for A of M ≤ 64 rows, B of N
// columns and depth D, with the operands given as functions: a(m, k) and b(k, n) are called only
// inside the bounds (m < M, k < D, n < N; M, N, D ≥ 1), and store(m, n, c) receives every result
// once.
//
// For each block of 64 columns, tiles of depth 32 of A and B go through shared memory and the 8
// warps multiply them on the tensor cores (WMMA m16n16k8 TF32, each warp a 16×32 piece of the
// 64×64 result) in "3×TF32": every f32 operand x is split into big = tf32(x) and small =
// tf32(x − big), and big·big + big·small + small·big is accumulated in f32. This keeps the product
// within a few f32 roundings of the exact one (plain TF32 would keep 11 bits). The sums run in a
// fixed order.
// kAKFast / kBNFast say which index neighbouring threads vary when loading a tile (k for A, n for
// B by default: coalesced for row-major A and B); pass false for a transposed operand. Every thread
// of the block must call it with the same arguments; it synchronises the block before returning,
// but store()'s writes need a __syncthreads() before other threads read them.
#pragma once
#include <mma.h>

namespace linea::cuda {

inline constexpr int kBlockGemmThreads = 256;

struct alignas(128) BlockGemmTiles {
  static constexpr int kRows = 64, kDepth = 32, kPitch = 64 + 4;
  union {
    struct {
      float a[kDepth][kPitch];  // a[k][m]: A column-major
      float b[kDepth][kPitch];  // b[k][n]: B row-major
    } in;
    float c[kRows][kPitch];  // the 64×64 result, row-major
  };
};

namespace block_gemm_detail {
namespace wmma = nvcuda::wmma;

// Splits a loaded fragment x into big = tf32(x) (in place) and small = tf32(x − big).
template <class Fragment>
__device__ __forceinline__ void split_tf32(Fragment& big, Fragment& small) {
#pragma unroll
  for (int i = 0; i < big.num_elements; ++i) {
    const float x = big.x[i];
    big.x[i] = wmma::__float_to_tf32(x);
    small.x[i] = wmma::__float_to_tf32(x - big.x[i]);
  }
}
}  // namespace block_gemm_detail

template <bool kAKFast = true, bool kBNFast = true, class FA, class FB, class FS>
__device__ void block_gemm(int M, int N, int D, FA a, FB b, FS store, BlockGemmTiles& t) {
  namespace wmma = nvcuda::wmma;
  constexpr int R = BlockGemmTiles::kRows, KD = BlockGemmTiles::kDepth, P = BlockGemmTiles::kPitch;
  using FragmentA = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
  using FragmentB = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
  using Accumulator = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;
  const int warp = threadIdx.x / 32;
  const int wm = (warp % 4) * 16, wn = (warp / 4) * 32;  // the warp's piece: rows wm.., columns wn..
  for (int n0 = 0; n0 < N; n0 += R) {
    Accumulator acc[2];
    wmma::fill_fragment(acc[0], 0.0f);
    wmma::fill_fragment(acc[1], 0.0f);
    for (int k0 = 0; k0 < D; k0 += KD) {
      for (int p = threadIdx.x; p < KD * R; p += kBlockGemmThreads) {
        // Out-of-range entries read a clamped, valid entry and store 0: no branch around the
        // loads, so the compiler can issue the tile's loads together.
        const int am = kAKFast ? p / KD : p % R, ak = kAKFast ? p % KD : p / R;
        const float av = a(min(am, M - 1), min(k0 + ak, D - 1));
        t.in.a[ak][am] = am < M && k0 + ak < D ? av : 0.0f;
        const int bn = kBNFast ? p % R : p / KD, bk = kBNFast ? p / R : p % KD;
        const float bv = b(min(k0 + bk, D - 1), min(n0 + bn, N - 1));
        t.in.b[bk][bn] = n0 + bn < N && k0 + bk < D ? bv : 0.0f;
      }
      __syncthreads();
#pragma unroll
      for (int k = 0; k < KD; k += 8) {
        FragmentA a_big, a_small;
        wmma::load_matrix_sync(a_big, &t.in.a[k][wm], P);
        block_gemm_detail::split_tf32(a_big, a_small);
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          FragmentB b_big, b_small;
          wmma::load_matrix_sync(b_big, &t.in.b[k][wn + 16 * j], P);
          block_gemm_detail::split_tf32(b_big, b_small);
          wmma::mma_sync(acc[j], a_small, b_big, acc[j]);
          wmma::mma_sync(acc[j], a_big, b_small, acc[j]);
          wmma::mma_sync(acc[j], a_big, b_big, acc[j]);
        }
      }
      __syncthreads();
    }
    wmma::store_matrix_sync(&t.c[wm][wn], acc[0], P, wmma::mem_row_major);
    wmma::store_matrix_sync(&t.c[wm][wn + 16], acc[1], P, wmma::mem_row_major);
    __syncthreads();
    for (int p = threadIdx.x; p < R * R; p += kBlockGemmThreads) {
      const int m = p / R, n = p % R;
      if (m < M && n0 + n < N) store(m, n0 + n, t.c[m][n]);
    }
    __syncthreads();
  }
}

}  // namespace linea::cuda
