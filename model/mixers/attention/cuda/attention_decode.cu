// Attention of new queries over KV caches on CUDA (model/mixers/attention/cuda/attention_decode.h),
// split over the keys. Query t (sequence s, position p) sees the positions j ∈ [lo, p], lo =
// max(0, p − window + 1) (window 0: lo = 0), at row s·C + j mod C of the caches; its split z takes
// j ∈ [lo + 256z, min(p + 1, lo + 256(z + 1))). With G = Hq / Hkv query heads per kv head:
//
//   split_kernel    grid (query t, kv head, split z), 128 threads, for each of the G heads h:
//                     s_j = scale · q_h·k_j                        (one warp per key, lanes over dims)
//                     m_z = max_j s_j,  l_z = Σ_j e^{s_j − m_z},  a_z = Σ_j e^{s_j − m_z} v_j
//                   each key row and value row read once from memory for the G heads
//   combine_kernel  grid (query t, query head h):
//                     M = max_z m_z,  out = Σ_z e^{m_z − M} a_z / Σ_z e^{m_z − M} l_z
//
// m, l and a are f32 workspaces (one scratch request with the uploaded query table).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/cuda/element_types.cuh"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/warp_reduce.cuh"
#include "model/mixers/attention/cuda/attention_decode.h"

namespace linea::cuda {

namespace {

constexpr int kSplitKeys = 256;
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kMaxHeadDim = 256;
constexpr int kDimsPerLane = kMaxHeadDim / kWarpSize;
constexpr size_t kMaxSharedBytes = 48 * 1024 - kThreads * sizeof(float);  // beside split_kernel's `sums`

struct Geometry {
  const int32_t* queries;  // [N, 2]: (sequence, position)
  int64_t capacity;        // C
  int q_heads, kv_heads, head_dim, window, splits;
  float scale;
  float *m, *l, *a;  // [N, Hq, splits] (a: × head_dim)
};

__device__ __forceinline__ int first_key(int p, int window) {
  return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
}

// The workspace index of (query t, query head h, split z).
__device__ __forceinline__ int64_t part_index(const Geometry& g, int t, int h, int z) {
  return (int64_t{t} * g.q_heads + h) * g.splits + z;
}

template <class T>
__global__ void __launch_bounds__(kThreads) split_kernel(Geometry g, const T* q, const T* k, const T* v) {
  const int t = blockIdx.x, kv = blockIdx.y, z = blockIdx.z;
  const int s = g.queries[2 * t], p = g.queries[2 * t + 1];
  const int k0 = first_key(p, g.window) + z * kSplitKeys;
  if (k0 > p) return;  // a shorter query than the grid's longest
  const int count = min(p + 1 - k0, kSplitKeys), G = g.q_heads / g.kv_heads, D = g.head_dim;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  extern __shared__ float shared[];
  float* qs = shared;               // [G][D]: scale · q of the kv head's query heads
  float* score = qs + G * D;        // [G][kSplitKeys]: s_j, then e^{s_j − m}
  __shared__ float sums[kThreads];  // the value sums' parts
  for (int i = threadIdx.x; i < G * D; i += kThreads) {
    const int h = kv * G + i / D;
    qs[i] = g.scale * to_float(q[(int64_t{t} * g.q_heads + h) * D + i % D]);
  }
  __syncthreads();
  const int64_t width = int64_t{g.kv_heads} * D;
  const auto row = [&](int j) { return (int64_t{s} * g.capacity + j % g.capacity) * width + int64_t{kv} * D; };

  for (int jj = warp; jj < count; jj += kWarps) {
    const T* key = k + row(k0 + jj);
    float kr[kDimsPerLane];
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) {
      const int d = lane + i * kWarpSize;
      kr[i] = d < D ? to_float(key[d]) : 0.0f;
    }
    for (int h = 0; h < G; ++h) {
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < kDimsPerLane; ++i) {
        const int d = lane + i * kWarpSize;
        if (d < D) dot += qs[h * D + d] * kr[i];
      }
      dot = warp_sum(dot);
      if (lane == 0) score[h * kSplitKeys + jj] = dot;
    }
  }
  __syncthreads();

  for (int h = warp; h < G; h += kWarps) {  // m_z, l_z; the scores become e^{s_j − m_z}
    float* sc = score + h * kSplitKeys;
    float m = -INFINITY;
    for (int jj = lane; jj < count; jj += kWarpSize) m = fmaxf(m, sc[jj]);
    m = warp_max(m);
    float l = 0.0f;
    for (int jj = lane; jj < count; jj += kWarpSize) {
      const float e = expf(sc[jj] - m);
      sc[jj] = e;
      l += e;
    }
    l = warp_sum(l);
    if (lane == 0) {
      g.m[part_index(g, t, kv * G + h, z)] = m;
      g.l[part_index(g, t, kv * G + h, z)] = l;
    }
  }
  __syncthreads();

  // a_z: `parts` threads per head dim when D < 128, each over every parts-th key, then added up.
  const int parts = D < kThreads ? kThreads / D : 1;
  const int part = parts > 1 ? threadIdx.x / D : 0;
  for (int h = 0; h < G; ++h) {
    const float* w = score + h * kSplitKeys;
    float* a = g.a + part_index(g, t, kv * G + h, z) * D;
    for (int d0 = 0; d0 < D; d0 += kThreads) {
      const int d = d0 + (parts > 1 ? threadIdx.x % D : threadIdx.x);
      const bool active = d < D && part < parts;
      float sum = 0.0f;
      if (active) {
        for (int jj = part; jj < count; jj += parts) sum += w[jj] * to_float(v[row(k0 + jj) + d]);
      }
      if (parts > 1) {
        sums[threadIdx.x] = sum;
        __syncthreads();
        if (active && part == 0) {
          for (int i = 1; i < parts; ++i) sum += sums[i * D + d];
        }
        __syncthreads();
      }
      if (active && part == 0) a[d] = sum;
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) combine_kernel(Geometry g, T* out) {
  const int t = blockIdx.x, h = blockIdx.y, p = g.queries[2 * t + 1], D = g.head_dim;
  const int splits = (p - first_key(p, g.window)) / kSplitKeys + 1;
  float M = -INFINITY;
  for (int z = 0; z < splits; ++z) M = fmaxf(M, g.m[part_index(g, t, h, z)]);
  float den = 0.0f;
  for (int z = 0; z < splits; ++z) den += expf(g.m[part_index(g, t, h, z)] - M) * g.l[part_index(g, t, h, z)];
  for (int d = threadIdx.x; d < D; d += kThreads) {
    float num = 0.0f;
    for (int z = 0; z < splits; ++z) {
      num += expf(g.m[part_index(g, t, h, z)] - M) * g.a[part_index(g, t, h, z) * D + d];
    }
    out[(int64_t{t} * g.q_heads + h) * D + d] = from_float<T>(num / den);
  }
}

}  // namespace

void attention_over_cache(Tensor out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                          const Tensor& queries, const ops::AttentionShape& shape) {
  const int64_t n = queries.dim(0), D = shape.head_dim, G = shape.q_heads / shape.kv_heads;
  if (D > kMaxHeadDim) {
    throw std::invalid_argument("attention_over_cache: head_dim " + std::to_string(D) + " is above the CUDA kernel's " +
                                std::to_string(kMaxHeadDim));
  }
  const size_t shared = static_cast<size_t>(G * (D + kSplitKeys)) * sizeof(float);
  if (shared > kMaxSharedBytes) {
    throw std::invalid_argument("attention_over_cache: " + std::to_string(G) +
                                " query heads per kv head need more than 48 KiB of shared memory on CUDA");
  }
  const int32_t* query = queries.data<int32_t>();
  int64_t splits = 1;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t p = query[2 * t + 1], lo = shape.window > 0 ? std::max<int64_t>(0, p - shape.window + 1) : 0;
    splits = std::max(splits, (p - lo) / kSplitKeys + 1);
  }
  const size_t parts = static_cast<size_t>(n * shape.q_heads * splits) * sizeof(float);
  const std::vector<void*> p = scratch({queries.nbytes(), parts, parts, parts * static_cast<size_t>(D)});
  upload(p[0], queries.raw(), queries.nbytes());
  Geometry g{static_cast<const int32_t*>(p[0]),
             k_cache.dim(1),
             static_cast<int>(shape.q_heads),
             static_cast<int>(shape.kv_heads),
             static_cast<int>(D),
             static_cast<int>(shape.window),
             static_cast<int>(splits),
             static_cast<float>(shape.scale),
             static_cast<float*>(p[1]),
             static_cast<float*>(p[2]),
             static_cast<float*>(p[3])};
  dispatch_float(q.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const dim3 split_grid(static_cast<unsigned>(n), static_cast<unsigned>(shape.kv_heads),
                          static_cast<unsigned>(splits));
    split_kernel<T><<<split_grid, kThreads, shared>>>(g, data_of<T>(q), data_of<T>(k_cache), data_of<T>(v_cache));
    check_launch("attention_over_cache split_kernel");
    combine_kernel<T>
        <<<dim3(static_cast<unsigned>(n), static_cast<unsigned>(shape.q_heads)), kThreads>>>(g, data_of<T>(out));
    check_launch("attention_over_cache combine_kernel");
  });
}

}  // namespace linea::cuda
