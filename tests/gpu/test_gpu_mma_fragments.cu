// The tensor-core fragment helpers of kernels/chunk/cuda/mma_bf16.cuh against a CPU product: one warp
// computes a 16 × 16 block of A B over depth 32 at offsets (rows 16.., columns 16.., depth 16..)
// with each operand held as it is or transposed in a swizzled tile. The inputs are random bf16
// values, so every result must agree with the f64 sum of the same products to f32 rounding.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/chunk/cuda/mma_bf16.cuh"
#include "kernels/random.h"
#include "tests/gpu/gpu_test.h"

namespace linea {
namespace {

using cuda::mma::bf16;
using cuda::mma::Hold;
using cuda::mma::Tile;

constexpr int kN = 64;  // the plain matrices and the tiles are 64 × 64

__device__ void fill(const Tile<kN>& t, const bf16* plain) {
  for (int p = threadIdx.x; p < kN * kN; p += 32) *t.at(p / kN, p % kN) = plain[p];
}

// c[i][j] for rows 16.., columns 16.. of A B over depth [16, 48).
template <Hold kA, Hold kB>
__global__ void product_kernel(const bf16* a, const bf16* b, float* c) {
  __shared__ __align__(128) bf16 sa[kN * kN], sb[kN * kN];
  const Tile<kN> ta{sa}, tb{sb};
  fill(ta, a);
  fill(tb, b);
  __syncwarp();
  float acc[2][4] = {};
  cuda::mma::product<kA, kB>(acc, ta, 16, tb, 16, 32, 16);
  for (int n = 0; n < 2; ++n) {
    cuda::mma::for_pairs(acc[n], 16, 16 + 8 * n, [&](int i, int j, float x0, float x1) {
      c[i * kN + j] = x0;
      c[i * kN + j + 1] = x1;
    });
  }
}

// product_at (addresses from TileLane) against product on the same tiles: rows 16.., columns 16..
// over depth [0, 32); c gets 1 where the two results differ in any bit, 0 where they agree.
template <Hold kA, Hold kB>
__global__ void product_at_kernel(const bf16* a, const bf16* b, float* c) {
  __shared__ __align__(128) bf16 sa[kN * kN], sb[kN * kN];
  const Tile<kN> ta{sa}, tb{sb};
  fill(ta, a);
  fill(tb, b);
  __syncwarp();
  float want[2][4] = {}, got[2][4] = {};
  cuda::mma::product<kA, kB>(want, ta, 16, tb, 16, 32, 0);
  const auto la = kA == Hold::as_is ? cuda::mma::a_mk_lane<kN>(16) : cuda::mma::a_km_lane<kN>(16);
  const auto lb = kB == Hold::as_is ? cuda::mma::b_kn_lane<kN>(16) : cuda::mma::b_nk_lane<kN>(16);
  cuda::mma::product_at<kA, kB, 32>(got, ta, la, tb, lb);
  for (int n = 0; n < 2; ++n) {
    cuda::mma::for_entries(16, 16 + 8 * n, [&](int i, int j, int r) {
      c[i * kN + j] = __float_as_uint(want[n][r]) != __float_as_uint(got[n][r]) ? 1.0f : 0.0f;
    });
  }
}

// TileLane's offsets against Tile::at for every lane of 8 warps: the loaders' lanes and the C
// fragments' at the offsets the delta rule's state passes use (rows and columns of the warp's
// result tile, depth steps of 16, column tiles in pairs). Counts the mismatches.
template <int C>
__global__ void lane_kernel(int* mismatches) {
  using cuda::mma::TileLane;
  bf16* const base = reinterpret_cast<bf16*>(uintptr_t{1} << 20);  // only offsets are compared
  const Tile<C> t{base};
  const int l = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int m0 = 16 * (w & 3), n0 = 32 * (w >> 2), m_state = C >= 128 ? 16 * w : m0;
  int bad = 0;
  const auto check = [&](const TileLane<C>& lane, int row, int col, int r0, int c0) {
    const auto want =
        static_cast<uint32_t>(reinterpret_cast<char*>(t.at(row + r0, col + c0)) - reinterpret_cast<char*>(base));
    bad += lane.at(r0, c0) != want;
  };
  for (int k = 0; k < C; k += 16) {
    check(cuda::mma::a_mk_lane<C>(m0), m0 + (l & 7) + ((l >> 3) & 1) * 8, (l >> 4) * 8, 0, k);
    for (int j = 0; j < 4; j += 2)
      check(cuda::mma::b_nk_lane<C>(n0), n0 + (l & 7) + (l >> 4) * 8, ((l >> 3) & 1) * 8, 8 * j, k);
  }
  for (int k = 0; k < 64; k += 16) {
    for (int c0 = 0; m_state + c0 < C; c0 += 128) {
      check(cuda::mma::a_km_lane<C>(m_state), (l & 7) + (l >> 4) * 8, m_state + ((l >> 3) & 1) * 8, k, c0);
    }
    for (int j = 0; j < 4; j += 2)
      check(cuda::mma::b_kn_lane<C>(n0), (l & 7) + ((l >> 3) & 1) * 8, n0 + (l >> 4) * 8, k, 8 * j);
    for (int j = 0; j < 8; j += 2)
      check(cuda::mma::b_kn_lane<C>(0), (l & 7) + ((l >> 3) & 1) * 8, (l >> 4) * 8, k, 8 * j);
  }
  for (int r = 0; r < 2; ++r) {
    for (int n = 0; n < 4; ++n) check(cuda::mma::c_lane<C>(m0, n0), m0 + (l >> 2), n0 + 2 * (l & 3), 8 * r, 8 * n);
    for (int n = 0; n < 8; ++n) {
      for (int r0 = 0; m_state + r0 < C; r0 += 128) {
        check(cuda::mma::c_lane<C>(m_state, 0), m_state + (l >> 2), 2 * (l & 3), r0 + 8 * r, 8 * n);
      }
    }
  }
  atomicAdd(mismatches, bad);
}

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(p); }
};

std::vector<bf16> random_matrix(Rng& rng) {
  std::vector<bf16> m(kN * kN);
  for (bf16& x : m) x = __float2bfloat16(static_cast<float>(2.0 * rng.uniform() - 1.0));
  return m;
}

double value(const std::vector<bf16>& m, int r, int c) { return __bfloat162float(m[r * kN + c]); }

struct Matrices {
  std::vector<bf16> a, b;
  DeviceBuffer da{kN * kN * sizeof(bf16)}, db{kN * kN * sizeof(bf16)};
  DeviceBuffer dc{kN * kN * sizeof(float)};
  explicit Matrices(uint64_t seed) {
    Rng rng(seed);
    a = random_matrix(rng), b = random_matrix(rng);
    for (auto [to, from] : {std::pair{&da, &a}, {&db, &b}}) {
      EXPECT_EQ(cudaMemcpy(to->p, from->data(), kN * kN * sizeof(bf16), cudaMemcpyHostToDevice), cudaSuccess);
    }
    EXPECT_EQ(cudaMemset(dc.p, 0xff, kN * kN * sizeof(float)), cudaSuccess);  // NaN until written
  }
  std::vector<float> result() {
    std::vector<float> c(kN * kN);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(c.data(), dc.p, c.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return c;
  }
};

class GpuMmaFragments : public testing::GpuTest {};

template <Hold kA, Hold kB>
void check_product(uint64_t seed) {
  Matrices m(seed);
  product_kernel<kA, kB>
      <<<1, 32>>>(static_cast<bf16*>(m.da.p), static_cast<bf16*>(m.db.p), static_cast<float*>(m.dc.p));
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<float> c = m.result();
  for (int i = 16; i < 32; ++i) {
    for (int j = 16; j < 32; ++j) {
      double ref = 0.0;
      for (int k = 16; k < 48; ++k) {
        const double x = kA == Hold::as_is ? value(m.a, i, k) : value(m.a, k, i);
        const double y = kB == Hold::as_is ? value(m.b, k, j) : value(m.b, j, k);
        ref += x * y;
      }
      ASSERT_NEAR(c[i * kN + j], ref, 1e-5 * (1.0 + std::fabs(ref))) << "row " << i << " column " << j;
    }
  }
}

TEST_F(GpuMmaFragments, ProductAAsIsBAsIs) { check_product<Hold::as_is, Hold::as_is>(1); }
TEST_F(GpuMmaFragments, ProductATransposedBAsIs) { check_product<Hold::transposed, Hold::as_is>(2); }
TEST_F(GpuMmaFragments, ProductAAsIsBTransposed) { check_product<Hold::as_is, Hold::transposed>(3); }
TEST_F(GpuMmaFragments, ProductATransposedBTransposed) { check_product<Hold::transposed, Hold::transposed>(4); }

template <Hold kA, Hold kB>
void check_product_at(uint64_t seed) {
  Matrices m(seed);
  product_at_kernel<kA, kB>
      <<<1, 32>>>(static_cast<bf16*>(m.da.p), static_cast<bf16*>(m.db.p), static_cast<float*>(m.dc.p));
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<float> c = m.result();
  for (int i = 16; i < 32; ++i) {
    for (int j = 16; j < 32; ++j) ASSERT_EQ(c[i * kN + j], 0.0f) << "row " << i << " column " << j;
  }
}

TEST_F(GpuMmaFragments, ProductAtEqualsProduct) {
  check_product_at<Hold::as_is, Hold::as_is>(5);
  check_product_at<Hold::transposed, Hold::as_is>(6);
  check_product_at<Hold::as_is, Hold::transposed>(7);
  check_product_at<Hold::transposed, Hold::transposed>(8);
}

template <int C>
int lane_mismatches() {
  DeviceBuffer d(sizeof(int));
  EXPECT_EQ(cudaMemset(d.p, 0, sizeof(int)), cudaSuccess);
  lane_kernel<C><<<1, 256>>>(static_cast<int*>(d.p));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  int bad = -1;
  EXPECT_EQ(cudaMemcpy(&bad, d.p, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  return bad;
}

TEST_F(GpuMmaFragments, TileLaneOffsetsMatchTileAt) {
  EXPECT_EQ(lane_mismatches<64>(), 0);
  EXPECT_EQ(lane_mismatches<128>(), 0);
  EXPECT_EQ(lane_mismatches<256>(), 0);
}

}  // namespace
}  // namespace linea
