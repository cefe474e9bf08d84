// block_gemm: one thread block of 256 threads computes C = A·B for A of M ≤ 64 rows, B of N
// columns and depth D, with the operands given as functions: a(m, k) and b(k, n) are called only
// inside the bounds (m < M, k < D, n < N; M, N, D ≥ 1), or as Strided arrays (below); store(m, n, c)
// receives every result once.
//
// For each block of 64 columns, tiles of depth 32 of A and B go through shared memory and the 8
// warps multiply them on the tensor cores (WMMA m16n16k8 TF32, each warp a 16×32 piece of the
// 64×64 result).
// Precision: every operand is split, x = big + small with big = tf32(x) and small = tf32(x − big),
// and big·big + big·small + small·big is accumulated in f32 ("3×TF32"): the product stays within a
// few f32 roundings of the exact one. The sums run in a fixed order.
// gemm::a_m_fast / b_k_fast say which index neighbouring threads vary when loading a tile (by
// default k for A, n for B: coalesced for row-major A and B); pass them for a transposed operand.
// block_gemm_sum accumulates several such products into one result. Every thread of the block
// must call them with the same arguments; they synchronise the block before returning.
#pragma once
#include <mma.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/element_types.cuh"

namespace linea::cuda {

inline constexpr int kBlockGemmThreads = 256;

// block_gemm's options, or-ed together (0: A and B loaded with k and n fast).
namespace gemm {
enum Option : unsigned {
  a_m_fast = 1,  // load A with m fast (coalesced for a transposed, column-major A); else k fast
  b_k_fast = 2,  // load B with k fast (coalesced for a transposed B); else n fast
};
}  // namespace gemm

// A tile of A (64 × 32) is stored row-major ([m][k], pitch 36) when loaded with k fast and
// column-major ([k][m], pitch 68) otherwise, and B's (32 × 64) column-major ([n][k]) or row-major
// ([k][n]) likewise: the fast index is contiguous, so the threads of a warp store to distinct banks.
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

// An operand read straight from memory (f32 or bf16), instead of a function: entry (x, y) at
// data[x · stride + y], y being the index that neighbouring threads vary (k for A and n for B by
// default, m for A with gemm::a_m_fast, k for B with gemm::b_k_fast). Tiles then load as 16-byte
// vectors when data and stride allow it (one per 8 bf16 or 4 f32 entries), entry by entry otherwise.
template <class T>
struct Strided {
  const T* data;
  int64_t stride;
  float scale = 1.0f;  // every entry multiplied by it
};

// One product of a sum C = Σ A_t·B_t (block_gemm_sum): depth, A and B as for block_gemm.
template <class FA, class FB>
struct GemmTerm {
  int depth;
  FA a;
  FB b;
};
template <class FA, class FB>
__device__ GemmTerm<FA, FB> gemm_term(int depth, FA a, FB b) {
  return {depth, a, b};
}

namespace block_gemm_detail {
namespace wmma = nvcuda::wmma;

template <class F>
inline constexpr bool kIsStrided = false;
template <class T>
inline constexpr bool kIsStrided<Strided<T>> = true;

// The tile entries (x0 + x, y0 + y), x < kX, y < kY, of a strided operand into
// tile[x · (kY + 4) + y]; 0 outside x0 + x < x_end, y0 + y < y_end.
template <int kX, int kY, class T>
__device__ __forceinline__ void load_strided(const Strided<T>& op, int x0, int y0, int x_end, int y_end, float* tile) {
  constexpr int kVec = kPackWidth<T>, kVecsPerRow = kY / kVec;
  const bool vectors = reinterpret_cast<uintptr_t>(op.data) % 16 == 0 && op.stride % kVec == 0;
  if (vectors) {
    for (int q = threadIdx.x; q < kX * kVecsPerRow; q += kBlockGemmThreads) {
      const int x = q / kVecsPerRow, y = q % kVecsPerRow * kVec;
      float v[kVec];
      const T* from = op.data + static_cast<int64_t>(x0 + x) * op.stride + y0 + y;
      if (x0 + x < x_end && y0 + y + kVec <= y_end) {
        const Pack<T, kVec> pack = *reinterpret_cast<const Pack<T, kVec>*>(from);
#pragma unroll
        for (int u = 0; u < kVec; ++u) v[u] = op.scale * to_float(pack.v[u]);
      } else {
#pragma unroll
        for (int u = 0; u < kVec; ++u) {
          v[u] = x0 + x < x_end && y0 + y + u < y_end ? op.scale * to_float(from[u]) : 0.0f;
        }
      }
#pragma unroll
      for (int u = 0; u < kVec; u += 4) {
        *reinterpret_cast<float4*>(&tile[x * (kY + 4) + y + u]) = make_float4(v[u], v[u + 1], v[u + 2], v[u + 3]);
      }
    }
  } else {
    for (int q = threadIdx.x; q < kX * kY; q += kBlockGemmThreads) {
      const int x = q / kY, y = q % kY;
      const bool inside = x0 + x < x_end && y0 + y < y_end;
      tile[x * (kY + 4) + y] =
          inside ? op.scale * to_float(op.data[static_cast<int64_t>(x0 + x) * op.stride + y0 + y]) : 0.0f;
    }
  }
}

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

// C = Σ_t A_t·B_t over the terms (each A_t of M rows, B_t of N columns, depth terms.depth), in the
// order given, into one accumulator: as block_gemm otherwise (the same options for every term).
template <unsigned kOptions = 0, class FS, class... Terms>
__device__ void block_gemm_sum(int M, int N, FS store, BlockGemmTiles& t, const Terms&... terms) {
  namespace wmma = nvcuda::wmma;
  namespace detail = block_gemm_detail;
  constexpr int R = BlockGemmTiles::kRows, KD = BlockGemmTiles::kDepth, P = BlockGemmTiles::kPitch,
                DP = BlockGemmTiles::kDepthPitch;
  constexpr bool kAK = !(kOptions & gemm::a_m_fast), kBN = !(kOptions & gemm::b_k_fast);
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
  for (int n0 = 0; n0 < N; n0 += R) {
    Accumulator acc[2];
    wmma::fill_fragment(acc[0], 0.0f);
    wmma::fill_fragment(acc[1], 0.0f);
    const auto accumulate = [&](const auto& term) {
      using FA = std::decay_t<decltype(term.a)>;
      using FB = std::decay_t<decltype(term.b)>;
      const int D = term.depth;
      const auto& a = term.a;
      const auto& b = term.b;
      for (int k0 = 0; k0 < D; k0 += KD) {
        // A function operand: out-of-range entries read a clamped, valid entry and store 0, with no
        // branch around the loads, so the compiler can issue several together.
        if constexpr (detail::kIsStrided<FA>) {
          if constexpr (kAK) {
            detail::load_strided<R, KD>(a, 0, k0, M, D, t.in.a);
          } else {
            detail::load_strided<KD, R>(a, k0, 0, D, M, t.in.a);
          }
        } else {
          for (int p = threadIdx.x; p < KD * R; p += kBlockGemmThreads) {
            const int am = kAK ? p / KD : p % R, ak = kAK ? p % KD : p / R;
            const float av = a(min(am, M - 1), min(k0 + ak, D - 1));
            t.in.a[a_at(am, ak)] = am < M && k0 + ak < D ? av : 0.0f;
          }
        }
        if constexpr (detail::kIsStrided<FB>) {
          if constexpr (kBN) {
            detail::load_strided<KD, R>(b, k0, n0, D, N, t.in.b);
          } else {
            detail::load_strided<R, KD>(b, n0, k0, N, D, t.in.b);
          }
        } else {
          for (int p = threadIdx.x; p < KD * R; p += kBlockGemmThreads) {
            const int bn = kBN ? p % R : p / KD, bk = kBN ? p / R : p % KD;
            const float bv = b(min(k0 + bk, D - 1), min(n0 + bn, N - 1));
            t.in.b[b_at(bk, bn)] = n0 + bn < N && k0 + bk < D ? bv : 0.0f;
          }
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < KD; k += 8) {
          FragmentA a_big, a_small;
          wmma::load_matrix_sync(a_big, &t.in.a[a_at(wm, k)], kLeadA);
          detail::split_tf32(a_big, a_small);
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            FragmentB b_big, b_small;
            wmma::load_matrix_sync(b_big, &t.in.b[b_at(k, wn + 16 * j)], kLeadB);
            detail::split_tf32(b_big, b_small);
            wmma::mma_sync(acc[j], a_small, b_big, acc[j]);
            wmma::mma_sync(acc[j], a_big, b_small, acc[j]);
            wmma::mma_sync(acc[j], a_big, b_big, acc[j]);
          }
        }
        __syncthreads();
      }
    };
    (accumulate(terms), ...);
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

template <unsigned kOptions = 0, class FA, class FB, class FS>
__device__ void block_gemm(int M, int N, int D, FA a, FB b, FS store, BlockGemmTiles& t) {
  block_gemm_sum<kOptions>(M, N, store, t, gemm_term(D, a, b));
}

}  // namespace linea::cuda
