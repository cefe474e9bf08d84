#include <cuda_runtime.h>

#include <algorithm>
#include <array>

#include "kernels/cuda/check.h"
#include "kernels/cuda/launch.h"

namespace linea::cuda {

int multiprocessor_count() {
  constexpr int kMaxDevices = 64;
  thread_local std::array<int, kMaxDevices> counts{};  // 0 = not asked yet
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  int& count = counts.at(static_cast<size_t>(device));
  if (count == 0) {
    check_cuda(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device),
               "cudaDeviceGetAttribute(multiprocessor count)");
  }
  return count;
}

int grid_stride_blocks(int64_t items, int threads) {
  const int64_t wanted = std::max<int64_t>(1, ceil_div(items, threads));
  return static_cast<int>(std::min<int64_t>(wanted, int64_t{16} * multiprocessor_count()));
}

}  // namespace linea::cuda
