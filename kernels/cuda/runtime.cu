#include <cuda_runtime.h>

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

std::shared_ptr<void> allocate(size_t bytes) {
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, bytes), ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str());
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}

void memset_zero(void* data, size_t bytes) { check_cuda(cudaMemset(data, 0, bytes), "cudaMemset"); }

void copy(void* dst, const void* src, size_t bytes) {
  check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
}

}  // namespace linea::cuda
