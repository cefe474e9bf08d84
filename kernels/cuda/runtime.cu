#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/runtime.h"

namespace linea::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

void set_device(int device) {
  check_cuda(cudaSetDevice(device), ("cudaSetDevice(" + std::to_string(device) + ")").c_str());
}

namespace {
std::atomic<size_t> allocated{0}, peak_allocated{0};
std::atomic<int64_t> allocations{0};

// LINEA_CUDA_ALLOC_LOG=M: every allocation of at least M MiB, and its release, on stderr with a
// number and the bytes held after it, to tell where a peak comes from (a diagnostic; off unset).
size_t logged_from_bytes() {
  static const size_t bytes = [] {
    const char* mib = std::getenv("LINEA_CUDA_ALLOC_LOG");
    return mib ? static_cast<size_t>(std::max(0.0, std::atof(mib)) * double(1 << 20)) : SIZE_MAX;
  }();
  return bytes;
}
void log_allocation(const char* what, int64_t number, size_t bytes, size_t held) {
  std::fprintf(stderr, "cuda %s #%lld: %.1f MiB, held %.1f MiB\n", what, static_cast<long long>(number),
               double(bytes) / double(1 << 20), double(held) / double(1 << 20));
}
}  // namespace

std::shared_ptr<void> allocate(size_t bytes) {
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, bytes), ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str());
  const size_t now = allocated += bytes;
  size_t peak = peak_allocated.load();
  while (now > peak && !peak_allocated.compare_exchange_weak(peak, now)) {
  }
  const int64_t number = allocations++;
  const bool logged = bytes >= logged_from_bytes();
  if (logged) log_allocation("alloc", number, bytes, now);
  return std::shared_ptr<void>(p, [bytes, number, logged](void* q) {
    cudaFree(q);
    const size_t held = allocated -= bytes;
    if (logged) log_allocation("free", number, bytes, held);
  });
}

size_t allocated_bytes() { return allocated.load(); }
size_t peak_allocated_bytes() { return peak_allocated.load(); }
void reset_peak_allocated_bytes() { peak_allocated = allocated.load(); }

void memset_zero(void* data, size_t bytes) { check_cuda(cudaMemset(data, 0, bytes), "cudaMemset"); }

void copy(void* dst, const void* src, size_t bytes) {
  check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
}

void copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows) {
  check_cuda(cudaMemcpy2D(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDefault), "cudaMemcpy2D");
}

void* event_create() {
  cudaEvent_t event = nullptr;
  check_cuda(cudaEventCreate(&event), "cudaEventCreate");
  return event;
}

void event_record(void* event) {
  check_cuda(cudaEventRecord(static_cast<cudaEvent_t>(event), cudaStreamLegacy), "cudaEventRecord");
}

float event_elapsed_ms(void* start, void* end) {
  check_cuda(cudaEventSynchronize(static_cast<cudaEvent_t>(end)), "cudaEventSynchronize");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)),
             "cudaEventElapsedTime");
  return ms;
}

}  // namespace linea::cuda
