// Thin checked wrappers over the CUDA runtime used by the device-independent code.
#pragma once
#include <cstddef>
#include <memory>

namespace linea::cuda {

int device_count();           // 0 when no driver or device is present
void set_device(int device);  // cudaSetDevice for the calling thread
std::shared_ptr<void> allocate(size_t bytes);
// Bytes allocate() holds now, and the most it has held at once since the process started (every
// device together; what linea allocates, without the CUDA context and libraries' own memory).
size_t allocated_bytes();
size_t peak_allocated_bytes();
void reset_peak_allocated_bytes();  // the peak starts again from what is held now
void memset_zero(void* data, size_t bytes);
void copy(void* dst, const void* src, size_t bytes);  // any direction (unified addressing)
// `rows` runs of `width` bytes, run i from src + i·src_pitch to dst + i·dst_pitch (cudaMemcpy2D).
void copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows);

// CUDA events on the legacy default stream, where every op runs (kernels/op_profile.cpp times ops
// with them; it keeps every event it creates for reuse). An event is an opaque handle: create,
// record (marks the stream's position now), and the milliseconds between two recorded events
// (waits until `end` has happened).
void* event_create();
void event_record(void* event);
float event_elapsed_ms(void* start, void* end);

}  // namespace linea::cuda
