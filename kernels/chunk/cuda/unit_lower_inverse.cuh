// invert_unit_lower: T = (I + A)^{-1} for a strictly lower triangular 64×64 A in shared memory
// (A_ij read for j < i only), by one block of 256 threads, in blocks of 16 × 16, all in f32:
//   1. the diagonal blocks' inverses D_b = (I + A_bb)^{-1}, one thread per column j of a block,
//      its column in registers: x_i = −Σ_{m<i} A_im x_m below the diagonal, x_j = 1, 0 above;
//   2. block row by block row, b = 1, 2, 3: X_bc = Σ_{c≤m<b} A_bm T_mc, then T_bc = −D_b X_bc for
//      c < b (T_mc known for m < b), one thread per (c, row, 4 neighbouring columns).
// The rows are read 16 bytes at a time (kPitch a multiple of 4: a warp's 8 rows of A then fall in
// 8 different groups of 4 banks), and each row entry of A feeds 4 columns, so the inverse costs
// about an eighth of the shared-memory loads of one entry at a time. T is zero above the
// diagonal. Ten block barriers. Every thread of the block must call it; it synchronises the block
// before returning.
#pragma once

namespace linea::cuda {

template <int kPitch>
__device__ void invert_unit_lower(const float (*A)[kPitch], float (*T)[kPitch]) {
  constexpr int kN = 64, kB = 16;
  static_assert(kPitch >= kN && kPitch % 4 == 0, "rows of 16-byte aligned quads");
  const int t = threadIdx.x;
  for (int p = t; p < kN * kN / 4; p += blockDim.x) {  // zero above the diagonal blocks
    const int i = p / (kN / 4), j = 4 * (p % (kN / 4));
    if (j >= (i / kB + 1) * kB) *reinterpret_cast<float4*>(&T[i][j]) = float4{0.0f, 0.0f, 0.0f, 0.0f};
  }
  if (t < kN) {  // column j of the diagonal block at `base`
    const int base = t - t % kB, j = t % kB;
    float x[kB];
#pragma unroll
    for (int i = 0; i < kB; ++i) {
      float s = 0.0f;
#pragma unroll
      for (int m4 = 0; m4 < i; m4 += 4) {
        const float4 a = *reinterpret_cast<const float4*>(&A[base + i][base + m4]);
        s += a.x * x[m4];
        if (m4 + 1 < i) s += a.y * x[m4 + 1];
        if (m4 + 2 < i) s += a.z * x[m4 + 2];
        if (m4 + 3 < i) s += a.w * x[m4 + 3];
      }
      x[i] = i < j ? 0.0f : i == j ? 1.0f : -s;
    }
#pragma unroll
    for (int i = 0; i < kB; ++i) T[base + i][base + j] = x[i];
  }
  __syncthreads();
  const int c = t / (kB * kB / 4), i = t / 4 % kB, j = 4 * (t % 4);  // (c, row, columns j..j + 3)
  for (int b = 1; b < kN / kB; ++b) {
    const bool active = c < b;
    const int row = b * kB + i, col = c * kB + j;
    float4 y{0.0f, 0.0f, 0.0f, 0.0f};
    if (active) {  // X_bc, into T_bc for now
      for (int m4 = c * kB; m4 < b * kB; m4 += 4) {
        const float4 a = *reinterpret_cast<const float4*>(&A[row][m4]);
        const float av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const float4 tm = *reinterpret_cast<const float4*>(&T[m4 + r][col]);
          y.x += av[r] * tm.x, y.y += av[r] * tm.y, y.z += av[r] * tm.z, y.w += av[r] * tm.w;
        }
      }
      *reinterpret_cast<float4*>(&T[row][col]) = y;
    }
    __syncthreads();
    if (active) {  // T_bc = −D_b X_bc (D_b is zero above its diagonal)
      y = float4{0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int m4 = 0; m4 < kB; m4 += 4) {
        if (m4 > i) break;
        const float4 d = *reinterpret_cast<const float4*>(&T[b * kB + i][b * kB + m4]);
        const float dv[4] = {d.x, d.y, d.z, d.w};
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const float4 xm = *reinterpret_cast<const float4*>(&T[b * kB + m4 + r][col]);
          y.x -= dv[r] * xm.x, y.y -= dv[r] * xm.y, y.z -= dv[r] * xm.z, y.w -= dv[r] * xm.w;
        }
      }
    }
    __syncthreads();
    if (active) *reinterpret_cast<float4*>(&T[row][col]) = y;
    __syncthreads();
  }
}

}  // namespace linea::cuda
