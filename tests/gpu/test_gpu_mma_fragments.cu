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

}  // namespace
}  // namespace linea
