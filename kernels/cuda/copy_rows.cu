// Row copies by index (kernels/ops.h copy_rows): out[to, :] = in[from, :] for every pair (to, from).
// The pairs go up with one upload into scratch; one grid-stride kernel then moves the rows in units
// of the widest access (16, 8, 4, 2 or 1 bytes) that the row size and both base pointers allow, a
// thread per unit, so that a row's units are neighbouring threads (coalesced).
#include <cstdint>
#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/scratch.h"

namespace linea::cuda {

namespace {

template <class Unit>
__global__ void copy_rows_kernel(Unit* out, const Unit* in, const int32_t* pairs, int64_t count, int64_t units) {
  const int64_t n = count * units;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t pair = i / units, unit = i % units;
    out[pairs[2 * pair] * units + unit] = in[pairs[2 * pair + 1] * units + unit];
  }
}

template <class Unit>
void launch(void* out, const void* in, const int32_t* pairs, int64_t count, size_t row_bytes) {
  const int64_t units = static_cast<int64_t>(row_bytes / sizeof(Unit));
  copy_rows_kernel<Unit><<<grid_stride_blocks(count * units), kThreadsPerBlock>>>(
      static_cast<Unit*>(out), static_cast<const Unit*>(in), pairs, count, units);
  check_launch("copy_rows_kernel");
}

}  // namespace

void copy_rows(Tensor out, const Tensor& in, const Tensor& rows) {
  const int64_t count = rows.dim(0);
  const size_t row_bytes = static_cast<size_t>(in.dim(1)) * dtype_size(in.dtype());
  int32_t* pairs = static_cast<int32_t*>(scratch({rows.nbytes()})[0]);
  upload(pairs, rows.raw(), rows.nbytes());
  const uintptr_t alignment =
      row_bytes | reinterpret_cast<uintptr_t>(out.raw()) | reinterpret_cast<uintptr_t>(in.raw());
  if (alignment % 16 == 0) return launch<uint4>(out.raw(), in.raw(), pairs, count, row_bytes);
  if (alignment % 8 == 0) return launch<uint2>(out.raw(), in.raw(), pairs, count, row_bytes);
  if (alignment % 4 == 0) return launch<uint32_t>(out.raw(), in.raw(), pairs, count, row_bytes);
  if (alignment % 2 == 0) return launch<uint16_t>(out.raw(), in.raw(), pairs, count, row_bytes);
  launch<uint8_t>(out.raw(), in.raw(), pairs, count, row_bytes);
}

}  // namespace linea::cuda
