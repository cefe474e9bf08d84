#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda/runtime.h"

namespace linea::cuda {

namespace {
void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}
}  // namespace

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

void set_device(int device) {
  check(cudaSetDevice(device), ("cudaSetDevice(" + std::to_string(device) + ")").c_str());
}

std::shared_ptr<void> allocate(size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}

void memset_zero(void* data, size_t bytes) { check(cudaMemset(data, 0, bytes), "cudaMemset"); }

void copy(void* dst, const void* src, size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
}

}  // namespace linea::cuda
