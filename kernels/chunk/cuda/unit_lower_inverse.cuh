// invert_unit_lower: T = (I + A)^{-1} for a strictly lower triangular 64×64 A in shared memory
// (A_ij read for j < i only), by one block of 256 threads, in blocks of 16 × 16:
//   1. the diagonal blocks' inverses D_b = (I + A_bb)^{-1}, one thread per column (forward
//      substitution down the column: x_i = −Σ_{j≤m<i} A_im x_m, x_j = 1);
//   2. block row by block row, b = 1, 2, 3: T_bc = −D_b Σ_{c≤m<b} A_bm T_mc for c < b
//      (T_mc known for m < b), one thread per (row, column within the block).
// T is zero above the diagonal. Ten block barriers instead of one per row. Every thread of the
// block must call it; it synchronises the block before returning.
#pragma once

namespace linea::cuda {

template <int kPitch>
__device__ void invert_unit_lower(const float (*A)[kPitch], float (*T)[kPitch]) {
  constexpr int kN = 64, kB = 16;
  static_assert(kPitch >= kN);
  const int t = threadIdx.x;
  for (int p = t; p < kN * kN; p += blockDim.x) {
    const int i = p / kN, j = p % kN;
    if (j > i) T[i][j] = 0.0f;
  }
  if (t < kN) {  // column j of the diagonal block at `base`, down from its diagonal
    const int base = t - t % kB, j = t % kB;
    T[base + j][base + j] = 1.0f;
    for (int i = j + 1; i < kB; ++i) {
      float s = 0.0f;
      for (int m = j; m < i; ++m) s += A[base + i][base + m] * T[base + m][base + j];
      T[base + i][base + j] = -s;
    }
  }
  __syncthreads();
  const int i = t / kB % kB, jj = t % kB;  // 256 threads: one per entry of a 16×16 block
  for (int b = 1; b < kN / kB; ++b) {
    const int row = b * kB + i;
    float y[kN / kB - 1];
#pragma unroll
    for (int c = 0; c < kN / kB - 1; ++c) {  // X_bc = Σ_{c≤m<b} A_bm T_mc, into T_bc for now
      if (c < b) {
        float s = 0.0f;
        for (int m = c * kB; m < b * kB; ++m) s += A[row][m] * T[m][c * kB + jj];
        y[c] = s;
      }
    }
#pragma unroll
    for (int c = 0; c < kN / kB - 1; ++c) {
      if (c < b) T[row][c * kB + jj] = y[c];
    }
    __syncthreads();
#pragma unroll
    for (int c = 0; c < kN / kB - 1; ++c) {  // T_bc = −D_b X_bc
      if (c < b) {
        float s = 0.0f;
#pragma unroll
        for (int m = 0; m < kB; ++m) {
          if (m <= i) s += T[b * kB + i][b * kB + m] * T[b * kB + m][c * kB + jj];
        }
        y[c] = -s;
      }
    }
    __syncthreads();
#pragma unroll
    for (int c = 0; c < kN / kB - 1; ++c) {
      if (c < b) T[row][c * kB + jj] = y[c];
    }
    __syncthreads();
  }
}

}  // namespace linea::cuda
