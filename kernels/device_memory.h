// Raw memory on a device: allocation (freed when the last shared_ptr goes), zero fill and copies.
// CUDA memory is available only in builds with LINEA_WITH_CUDA; asking for it otherwise throws.
#pragma once
#include <cstddef>
#include <memory>

#include "kernels/tensor.h"

namespace linea {

std::shared_ptr<void> allocate_device_memory(size_t bytes, Device device);
void fill_device_memory_zero(void* data, size_t bytes, Device device);
void copy_device_memory(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// `rows` runs of `width` bytes: run i from src + i·src_pitch to dst + i·dst_pitch (one strided
// copy on CUDA).
void copy_device_memory_2d(void* dst, size_t dst_pitch, Device dst_device, const void* src, size_t src_pitch,
                           Device src_device, size_t width, size_t rows);
// True when this build has a CUDA backend (LINEA_WITH_CUDA).
bool cuda_backend_built();
// True when this build has CUDA and a device is visible.
bool cuda_device_available();
// The most CUDA memory this process has held at once through allocate_device_memory (0 without CUDA).
size_t cuda_peak_allocated_bytes();
// Starts that peak again from what is held now (nothing without CUDA).
void cuda_reset_peak_allocated_bytes();

}  // namespace linea
