#include <stdexcept>
#include <string>

#include "kernels/cuda/check.h"

namespace linea::cuda {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

void check_launch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("launch of ") + kernel + ": " + cudaGetErrorString(status));
  }
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string(what) + ": " + cublasLtGetStatusName(status) + " (" +
                             cublasLtGetStatusString(status) + ")");
  }
}

}  // namespace linea::cuda
