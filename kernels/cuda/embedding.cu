// Embedding lookup over a table holding rows [vocab_begin, vocab_begin + V) of the vocabulary (the
// whole table: vocab_begin = 0, every id in it):
//   out[n, :] = table[ids[n] − vocab_begin, :]   when ids[n] is in the table's rows, else 0.
// Backward: dtable[v, :] += Σ_{n : ids[n] − vocab_begin = v} dout[n, :], summed in token order.
// Each token gets a sort key, its row in the table or V when its id is another shard's; the token
// indices are sorted by key (CUB's stable radix sort), so the tokens of one row form a run; one
// block per run start adds that run's rows in token order (the run of key V adds nothing):
// deterministic, no atomic adds, and parallel over the distinct ids. Token frequencies are skewed,
// and a run costs its length in dependent steps (the column-by-column loop over a run took 2.4 ms a
// call of 16384 tokens in the 340M benchmark's op profile, H100), so the block finds the run's end
// blockDim positions at a time, each thread takes W columns (one 16-byte pack), and the run's rows
// are read kRowsInFlight at a time before they are added, still one by one in token order: the
// sums are those of the plain loop, bit for bit.
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
// One thread per W consecutive columns of one token's row (zeros for an id outside the table).
template <class T, int W>
__global__ void gather_rows_kernel(T* out, const T* table, const int32_t* ids, int64_t rows, int64_t dim,
                                   int64_t vocab_begin, int64_t table_rows) {
  const int64_t packs_per_row = dim / W, packs = rows * packs_per_row;
  for (int64_t q = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; q < packs; q += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = q / packs_per_row, j = (q % packs_per_row) * W;
    const int64_t row = ids[n] - vocab_begin;
    Pack<T, W> value;
    if (row >= 0 && row < table_rows) {
      value = *reinterpret_cast<const Pack<T, W>*>(table + row * dim + j);
    } else {
      for (int k = 0; k < W; ++k) value.v[k] = from_float<T>(0.0f);
    }
    *reinterpret_cast<Pack<T, W>*>(out + n * dim + j) = value;
  }
}

// keys[n] = ids[n] − vocab_begin when that is a row of the table, else table_rows; tokens[n] = n.
__global__ void sort_keys_kernel(int32_t* keys, int32_t* tokens, const int32_t* ids, int64_t n, int64_t vocab_begin,
                                 int64_t table_rows) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = ids[i] - vocab_begin;
    keys[i] = static_cast<int32_t>(row >= 0 && row < table_rows ? row : table_rows);
    tokens[i] = static_cast<int32_t>(i);
  }
}

constexpr int kRowsInFlight = 16;

// The end of the run of `key` that starts at sorted position p (the first position past it), found
// by the whole block blockDim.x positions at a time (rows ≤ INT_MAX: the host checks it).
__device__ int64_t run_end(const int32_t* sorted_keys, int64_t p, int64_t rows, int32_t key) {
  __shared__ int end;
  for (int64_t first = p + 1;; first += blockDim.x) {
    if (threadIdx.x == 0) end = static_cast<int>(rows);
    __syncthreads();
    const int64_t q = first + threadIdx.x;
    if (q < rows && sorted_keys[q] != key) atomicMin(&end, static_cast<int>(q));
    __syncthreads();
    const int found = end;
    __syncthreads();  // every thread has read `end` before the next step resets it
    if (found < rows || first + blockDim.x >= rows) return found;
  }
}

// Block p handles the run of equal keys starting at sorted position p (and exits if none starts
// there, or if the run is that of the ids outside the table, key table_rows):
//   dtable[key, j] += Σ_{q in the run, in order} dout[tokens[q], j]   (an f32 sum, rounded once)
template <class T, int W>
__global__ void add_runs_kernel(T* dtable, const T* dout, const int32_t* sorted_keys, const int32_t* tokens,
                                int64_t rows, int64_t dim, int64_t table_rows) {
  for (int64_t p = blockIdx.x; p < rows; p += gridDim.x) {
    const int32_t key = sorted_keys[p];  // a row of dtable, or table_rows
    if ((p > 0 && sorted_keys[p - 1] == key) || key == table_rows) continue;
    const int64_t end = run_end(sorted_keys, p, rows, key);
    for (int64_t j = int64_t{threadIdx.x} * W; j < dim; j += int64_t{blockDim.x} * W) {
      float sum[W] = {};
      for (int64_t q = p; q < end; q += kRowsInFlight) {
        Pack<T, W> row[kRowsInFlight];
#pragma unroll
        for (int r = 0; r < kRowsInFlight; ++r) {
          if (q + r < end) row[r] = load_pack<W>(dout + int64_t{tokens[q + r]} * dim + j);
        }
#pragma unroll
        for (int r = 0; r < kRowsInFlight; ++r) {
          if (q + r >= end) break;
#pragma unroll
          for (int e = 0; e < W; ++e) sum[e] += to_float(row[r].v[e]);
        }
      }
      T* cell = dtable + int64_t{key} * dim + j;
      Pack<T, W> updated = load_pack<W>(cell);
#pragma unroll
      for (int e = 0; e < W; ++e) updated.v[e] = from_float<T>(to_float(updated.v[e]) + sum[e]);
      store_pack<W>(cell, updated);
    }
  }
}

int bits_for(int64_t values) {
  int bits = 1;
  while (bits < 31 && (int64_t{1} << bits) < values) ++bits;
  return bits;
}
}  // namespace

void embedding_forward(Tensor out, const Tensor& table, const Tensor& ids, int64_t vocab_begin) {
  const int64_t rows = ids.dim(0), dim = table.dim(1), table_rows = table.dim(0);
  if (rows == 0 || dim == 0) return;
  dispatch_float(table.dtype(), [&](auto zero) {
    using T = decltype(zero);
    constexpr int W = kPackWidth<T>;
    T* o = data_of<T>(out);
    const T* t = data_of<T>(table);
    const int32_t* i = data_of<int32_t>(ids);
    if (dim % W == 0 && aligned16({o, t})) {
      gather_rows_kernel<T, W>
          <<<grid_stride_blocks(rows * dim / W), kThreadsPerBlock>>>(o, t, i, rows, dim, vocab_begin, table_rows);
    } else {
      gather_rows_kernel<T, 1>
          <<<grid_stride_blocks(rows * dim), kThreadsPerBlock>>>(o, t, i, rows, dim, vocab_begin, table_rows);
    }
    check_launch("gather_rows_kernel");
  });
}

void embedding_backward(Tensor dtable, const Tensor& dout, const Tensor& ids, int64_t vocab_begin) {
  const int64_t rows = ids.dim(0), dim = dtable.dim(1), table_rows = dtable.dim(0);
  if (rows == 0 || dim == 0) return;
  if (rows > INT_MAX || table_rows >= INT_MAX) {
    throw std::invalid_argument("embedding_backward: at most " + std::to_string(INT_MAX) +
                                " tokens and table rows on cuda (CUB's sort), got " + std::to_string(rows) +
                                " tokens and " + std::to_string(table_rows) + " rows");
  }
  const int n = static_cast<int>(rows);
  const int end_bit = bits_for(table_rows + 1);  // keys in [0, table_rows]
  size_t sort_bytes = 0;
  check_cuda(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const int32_t*>(nullptr),
                                             static_cast<int32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                             static_cast<int32_t*>(nullptr), n, 0, end_bit),
             "cub::DeviceRadixSort::SortPairs (size query)");
  const size_t index_bytes = static_cast<size_t>(rows) * sizeof(int32_t);
  const std::vector<void*> pieces = scratch({index_bytes, index_bytes, index_bytes, index_bytes, sort_bytes});
  int32_t* keys = static_cast<int32_t*>(pieces[0]);
  int32_t* sorted_keys = static_cast<int32_t*>(pieces[1]);
  int32_t* tokens = static_cast<int32_t*>(pieces[2]);
  int32_t* sorted_tokens = static_cast<int32_t*>(pieces[3]);
  sort_keys_kernel<<<grid_stride_blocks(rows), kThreadsPerBlock>>>(keys, tokens, data_of<int32_t>(ids), rows,
                                                                   vocab_begin, table_rows);
  check_launch("sort_keys_kernel");
  check_cuda(
      cub::DeviceRadixSort::SortPairs(pieces[4], sort_bytes, keys, sorted_keys, tokens, sorted_tokens, n, 0, end_bit),
      "cub::DeviceRadixSort::SortPairs");
  dispatch_float(dtable.dtype(), [&](auto zero) {
    using T = decltype(zero);
    constexpr int64_t kMaxBlocks = int64_t{1} << 30;
    const unsigned blocks = static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks);
    T* table = data_of<T>(dtable);
    const T* grads = data_of<T>(dout);
    dispatch_pack_width<T>(dim % kPackWidth<T> == 0 && aligned16({table, grads}), [&](auto width) {
      add_runs_kernel<T, decltype(width)::value>
          <<<blocks, kThreadsPerBlock>>>(table, grads, sorted_keys, sorted_tokens, rows, dim, table_rows);
    });
    check_launch("add_runs_kernel");
  });
}

}  // namespace linea::cuda
