// Embedding lookup: out[n, :] = table[ids[n], :].
// Backward: dtable[v, :] += Σ_{n : ids[n] = v} dout[n, :], summed in token order. The token
// indices are sorted by id (CUB's stable radix sort), so the tokens of one id form a run; one block
// per run start adds that run's rows, column by column, in token order: deterministic, no atomics,
// and parallel over the distinct ids.
#include <climits>
#include <cub/device/device_radix_sort.cuh>
#include <stdexcept>
#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/element_types.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/scratch.h"

namespace linea::cuda {

namespace {
// One thread per W consecutive columns of one row.
template <class T, int W>
__global__ void gather_rows_kernel(T* out, const T* table, const int32_t* ids, int64_t rows, int64_t dim) {
  const int64_t packs_per_row = dim / W, packs = rows * packs_per_row;
  for (int64_t q = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; q < packs; q += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = q / packs_per_row, j = (q % packs_per_row) * W;
    *reinterpret_cast<Pack<T, W>*>(out + n * dim + j) =
        *reinterpret_cast<const Pack<T, W>*>(table + int64_t{ids[n]} * dim + j);
  }
}

__global__ void iota_kernel(int32_t* v, int64_t n) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    v[i] = static_cast<int32_t>(i);
  }
}

// Block p handles the run of equal ids starting at sorted position p (and exits if none starts there).
template <class T>
__global__ void add_runs_kernel(T* dtable, const T* dout, const int32_t* sorted_ids, const int32_t* tokens,
                                int64_t rows, int64_t dim) {
  for (int64_t p = blockIdx.x; p < rows; p += gridDim.x) {
    const int32_t id = sorted_ids[p];
    if (p > 0 && sorted_ids[p - 1] == id) continue;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
      float sum = 0.0f;
      for (int64_t q = p; q < rows && sorted_ids[q] == id; ++q) sum += to_float(dout[int64_t{tokens[q]} * dim + j]);
      T& cell = dtable[int64_t{id} * dim + j];
      cell = from_float<T>(to_float(cell) + sum);
    }
  }
}

int bits_for(int64_t values) {
  int bits = 1;
  while (bits < 31 && (int64_t{1} << bits) < values) ++bits;
  return bits;
}
}  // namespace

void embedding_forward(Tensor out, const Tensor& table, const Tensor& ids) {
  const int64_t rows = ids.dim(0), dim = table.dim(1);
  if (rows == 0 || dim == 0) return;
  dispatch_float(table.dtype(), [&](auto zero) {
    using T = decltype(zero);
    constexpr int W = kPackWidth<T>;
    T* o = data_of<T>(out);
    const T* t = data_of<T>(table);
    const int32_t* i = data_of<int32_t>(ids);
    if (dim % W == 0 && aligned16({o, t})) {
      gather_rows_kernel<T, W><<<grid_stride_blocks(rows * dim / W), kThreadsPerBlock>>>(o, t, i, rows, dim);
    } else {
      gather_rows_kernel<T, 1><<<grid_stride_blocks(rows * dim), kThreadsPerBlock>>>(o, t, i, rows, dim);
    }
    check_launch("gather_rows_kernel");
  });
}

void embedding_backward(Tensor dtable, const Tensor& dout, const Tensor& ids) {
  const int64_t rows = ids.dim(0), dim = dtable.dim(1);
  if (rows == 0 || dim == 0) return;
  if (rows > INT_MAX) {
    throw std::invalid_argument("embedding_backward: ids: at most " + std::to_string(INT_MAX) +
                                " tokens on cuda (CUB's sort), got " + std::to_string(rows));
  }
  const int n = static_cast<int>(rows);
  const int end_bit = bits_for(dtable.dim(0));
  size_t sort_bytes = 0;
  check_cuda(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const int32_t*>(nullptr),
                                             static_cast<int32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                             static_cast<int32_t*>(nullptr), n, 0, end_bit),
             "cub::DeviceRadixSort::SortPairs (size query)");
  const size_t index_bytes = static_cast<size_t>(rows) * sizeof(int32_t);
  const std::vector<void*> pieces = scratch({index_bytes, index_bytes, index_bytes, sort_bytes});
  int32_t* sorted_ids = static_cast<int32_t*>(pieces[0]);
  int32_t* tokens = static_cast<int32_t*>(pieces[1]);
  int32_t* sorted_tokens = static_cast<int32_t*>(pieces[2]);
  iota_kernel<<<grid_stride_blocks(rows), kThreadsPerBlock>>>(tokens, rows);
  check_launch("iota_kernel");
  check_cuda(cub::DeviceRadixSort::SortPairs(pieces[3], sort_bytes, data_of<int32_t>(ids), sorted_ids, tokens,
                                             sorted_tokens, n, 0, end_bit),
             "cub::DeviceRadixSort::SortPairs");
  dispatch_float(dtable.dtype(), [&](auto zero) {
    using T = decltype(zero);
    constexpr int64_t kMaxBlocks = int64_t{1} << 30;
    const unsigned blocks = static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks);
    add_runs_kernel<T>
        <<<blocks, kThreadsPerBlock>>>(data_of<T>(dtable), data_of<T>(dout), sorted_ids, sorted_tokens, rows, dim);
    check_launch("add_runs_kernel");
  });
}

}  // namespace linea::cuda
