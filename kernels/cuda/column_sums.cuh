// Deterministic column sums for parameter gradients: out[at(j)] += Σ_{r<rows} f(r, j), j < width.
//
// f is a functor `__device__ float operator()(int64_t r, int64_t j) const` (a row-major matrix
// that is never stored); `at` maps a column to its place in out (the identity by default), so that
// columns can be ordered for coalesced reads whatever out's layout. The rows are cut into fixed
// blocks of kColumnSumRows, independent of the launch: one thread per (block b, column j) sums f
// over b's rows in row order into partials[b · width + j]; then add_partials adds
// Σ_b partials[b · width + j] to out[at(j)] in a fixed order (kPartialSlices slices of the blocks,
// each in block order, then the slices in order). No atomics: the result is the same bit for bit
// on every run. add_group_sums then folds such per-column sums into groups of neighbouring columns
// (per-head parameter gradients): out[h] += Σ_{k of group h} sums[k], one thread per group, in
// column order.
#pragma once
#include <cstdint>

#include "kernels/cuda/check.h"
#include "kernels/cuda/element_types.cuh"
#include "kernels/cuda/launch.h"

namespace linea::cuda {

inline constexpr int64_t kColumnSumRows = 64;

// Bytes of float partials that add_column_sums needs for `rows` × `width`.
inline size_t column_sum_partials_bytes(int64_t rows, int64_t width) {
  return static_cast<size_t>(ceil_div(rows, kColumnSumRows) * width) * sizeof(float);
}

template <class F>
__global__ void column_partials_kernel(float* partials, int64_t rows, int64_t width, F f) {
  const int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (j >= width) return;
  const int64_t blocks = (rows + kColumnSumRows - 1) / kColumnSumRows;
  for (int64_t b = blockIdx.y; b < blocks; b += gridDim.y) {
    const int64_t end = min(rows, (b + 1) * kColumnSumRows);
    float sum = 0.0f;
    for (int64_t r = b * kColumnSumRows; r < end; ++r) sum += f(r, j);
    partials[b * width + j] = sum;
  }
}

// The second pass: a block of kPartialColumns columns × kPartialSlices slices; slice k of column j
// sums the blocks k, k + kPartialSlices, … in order, then the slices are added in order.
inline constexpr int kPartialColumns = 32, kPartialSlices = 32;

template <class Out, class At>
__global__ void __launch_bounds__(kPartialColumns* kPartialSlices)
    add_partials_kernel(Out* out, const float* partials, int64_t blocks, int64_t width, At at) {
  __shared__ float slices[kPartialSlices][kPartialColumns + 1];
  const int64_t j = int64_t{blockIdx.x} * kPartialColumns + threadIdx.x;
  float sum = 0.0f;
  if (j < width) {
#pragma unroll 8
    for (int64_t b = threadIdx.y; b < blocks; b += kPartialSlices) sum += partials[b * width + j];
  }
  slices[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || j >= width) return;
  float total = 0.0f;
  for (int k = 0; k < kPartialSlices; ++k) total += slices[k][threadIdx.x];
  Out& cell = out[at(j)];
  cell = from_float<Out>(to_float(cell) + total);
}

struct SameColumn {
  __device__ int64_t operator()(int64_t j) const { return j; }
};

// The second pass alone, for kernels that write their own block partials: out[at(j)] +=
// Σ_{b<blocks} partials[b · width + j], in a fixed order (add_partials_kernel's).
template <class Out, class At = SameColumn>
void add_partials(Out* out, const float* partials, int64_t blocks, int64_t width, const At& at = At{}) {
  if (width == 0) return;
  add_partials_kernel<<<static_cast<unsigned>(ceil_div(width, kPartialColumns)),
                        dim3(kPartialColumns, kPartialSlices)>>>(out, partials, blocks, width, at);
  check_launch("add_partials_kernel");
}

// `partials` holds column_sum_partials_bytes(rows, width) of scratch.
template <class Out, class F, class At = SameColumn>
void add_column_sums(Out* out, float* partials, int64_t rows, int64_t width, const F& f, const At& at = At{}) {
  if (rows == 0 || width == 0) return;
  const int64_t blocks = ceil_div(rows, kColumnSumRows);
  constexpr int64_t kMaxGridY = 65535;
  const dim3 grid(static_cast<unsigned>(ceil_div(width, kThreadsPerBlock)),
                  static_cast<unsigned>(blocks < kMaxGridY ? blocks : kMaxGridY));
  column_partials_kernel<<<grid, kThreadsPerBlock>>>(partials, rows, width, f);
  check_launch("column_partials_kernel");
  add_partials(out, partials, blocks, width, at);
}

template <class Out>
__global__ void add_group_sums_kernel(Out* out, const float* sums, int64_t groups, int64_t per_group) {
  const int64_t h = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (h >= groups) return;
  float sum = 0.0f;
  for (int64_t k = h * per_group; k < (h + 1) * per_group; ++k) sum += sums[k];
  out[h] = from_float<Out>(to_float(out[h]) + sum);
}

// sums: groups · per_group floats on the device.
template <class Out>
void add_group_sums(Out* out, const float* sums, int64_t groups, int64_t per_group) {
  if (groups == 0) return;
  add_group_sums_kernel<<<static_cast<unsigned>(ceil_div(groups, kThreadsPerBlock)), kThreadsPerBlock>>>(
      out, sums, groups, per_group);
  check_launch("add_group_sums_kernel");
}

}  // namespace linea::cuda
