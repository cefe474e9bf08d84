// Checked CUDA calls: every failing CUDA runtime or cuBLAS status becomes a std::runtime_error
// naming the call (or kernel) and the library's own description of the error.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

namespace linea::cuda {

void check_cuda(cudaError_t status, const char* what);
// The error of the most recent kernel launch on this thread, if any.
void check_launch(const char* kernel);
void check_cublas(cublasStatus_t status, const char* what);

}  // namespace linea::cuda
