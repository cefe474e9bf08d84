#include "kernels/device_memory.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/runtime.h"
#endif

namespace linea {

namespace {
#ifndef LINEA_WITH_CUDA
[[noreturn]] void no_cuda() {
  throw std::runtime_error("this build of linea has no CUDA backend (configure with nvcc present, LINEA_CUDA=ON)");
}
#endif
constexpr size_t kHostAlignment = 64;
}  // namespace

std::shared_ptr<void> allocate_device_memory(size_t bytes, Device device) {
  if (device == Device::cpu) {
    const size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    void* p = std::aligned_alloc(kHostAlignment, rounded);
    if (!p) throw std::bad_alloc();
    return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  }
#ifdef LINEA_WITH_CUDA
  return cuda::allocate(bytes);
#else
  no_cuda();
#endif
}

void fill_device_memory_zero(void* data, size_t bytes, Device device) {
  if (bytes == 0) return;
  if (device == Device::cpu) {
    std::memset(data, 0, bytes);
    return;
  }
#ifdef LINEA_WITH_CUDA
  cuda::memset_zero(data, bytes);
#else
  no_cuda();
#endif
}

void copy_device_memory(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == Device::cpu && src_device == Device::cpu) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef LINEA_WITH_CUDA
  cuda::copy(dst, src, bytes);
#else
  no_cuda();
#endif
}

void copy_device_memory_2d(void* dst, size_t dst_pitch, Device dst_device, const void* src, size_t src_pitch,
                           Device src_device, size_t width, size_t rows) {
  if (width == 0 || rows == 0) return;
  if (rows == 1) return copy_device_memory(dst, dst_device, src, src_device, width);
  if (dst_device == Device::cpu && src_device == Device::cpu) {
    for (size_t i = 0; i < rows; ++i) {
      std::memcpy(static_cast<char*>(dst) + i * dst_pitch, static_cast<const char*>(src) + i * src_pitch, width);
    }
    return;
  }
#ifdef LINEA_WITH_CUDA
  cuda::copy_2d(dst, dst_pitch, src, src_pitch, width, rows);
#else
  no_cuda();
#endif
}

bool cuda_backend_built() {
#ifdef LINEA_WITH_CUDA
  return true;
#else
  return false;
#endif
}

bool cuda_device_available() {
#ifdef LINEA_WITH_CUDA
  return cuda::device_count() > 0;
#else
  return false;
#endif
}

size_t cuda_peak_allocated_bytes() {
#ifdef LINEA_WITH_CUDA
  return cuda::peak_allocated_bytes();
#else
  return 0;
#endif
}

void cuda_reset_peak_allocated_bytes() {
#ifdef LINEA_WITH_CUDA
  cuda::reset_peak_allocated_bytes();
#endif
}

}  // namespace linea
