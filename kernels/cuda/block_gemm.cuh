// block_gemm: one thread block computes C = A·B for A of M ≤ 64 rows, B of N columns and depth D,
// in f32, with the operands given as functions: a(m, k) and b(k, n) are called only inside the
// bounds (m < M, k < D, n < N), and store(m, n, c) receives every result once. For each block of 64
// columns, tiles of depth 16 of A and B go through shared memory and each of the 256 threads
// accumulates a 4×4 piece of the 64×64 result in registers; the k-sums run in a fixed order.
// kAKFast / kBNFast say which index neighbouring threads vary when loading a tile (k for A, n for
// B by default: coalesced for row-major A and B); pass false for a transposed operand. Every thread
// of the block must call it with the same arguments; it synchronises the block before returning,
// but store()'s writes need a __syncthreads() before other threads read them.
#pragma once

namespace linea::cuda {

inline constexpr int kBlockGemmThreads = 256;

struct BlockGemmTiles {
  static constexpr int kRows = 64, kDepth = 16, kPitch = 64 + 4;
  float a[kDepth][kPitch];  // a[k][m]
  float b[kDepth][kPitch];  // b[k][n]
};

template <bool kAKFast = true, bool kBNFast = true, class FA, class FB, class FS>
__device__ void block_gemm(int M, int N, int D, FA a, FB b, FS store, BlockGemmTiles& t) {
  constexpr int R = BlockGemmTiles::kRows, KD = BlockGemmTiles::kDepth;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;  // columns tx·4.., rows ty·4..
  for (int n0 = 0; n0 < N; n0 += R) {
    float acc[4][4] = {};
    for (int k0 = 0; k0 < D; k0 += KD) {
      for (int p = threadIdx.x; p < KD * R; p += kBlockGemmThreads) {
        const int am = kAKFast ? p / KD : p % R, ak = kAKFast ? p % KD : p / R;
        t.a[ak][am] = am < M && k0 + ak < D ? a(am, k0 + ak) : 0.0f;
        const int bn = kBNFast ? p % R : p / KD, bk = kBNFast ? p / R : p % KD;
        t.b[bk][bn] = n0 + bn < N && k0 + bk < D ? b(k0 + bk, n0 + bn) : 0.0f;
      }
      __syncthreads();
#pragma unroll
      for (int k = 0; k < KD; ++k) {
        float av[4], bv[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) av[r] = t.a[k][ty * 4 + r];
#pragma unroll
        for (int c = 0; c < 4; ++c) bv[c] = t.b[k][tx * 4 + c];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
#pragma unroll
          for (int c = 0; c < 4; ++c) acc[r][c] += av[r] * bv[c];
        }
      }
      __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int m = ty * 4 + r, n = n0 + tx * 4 + c;
        if (m < M && n < N) store(m, n, acc[r][c]);
      }
    }
  }
}

}  // namespace linea::cuda
