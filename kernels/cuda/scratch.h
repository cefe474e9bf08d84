// Scratch device memory for the CUDA ops (partial sums, sort buffers, logits blocks).
//
// Every op runs on the default stream, so one call's kernels finish, in stream order, before the
// next call's start: a single grow-only buffer per thread and device serves every call. A call
// asks for all of its pieces at once; each piece is 256-byte aligned, and the pointers stay valid
// until the next call of scratch() on the same thread, device and level. Growing frees the old
// buffer (cudaFree waits for the kernels still using it). Ops take level 0; an op that calls
// another op and keeps pieces across that call takes its own from level 1.
#pragma once
#include <cstddef>
#include <vector>

namespace linea::cuda {

std::vector<void*> scratch(const std::vector<size_t>& piece_bytes, int level = 0);

// Copies `bytes` of host memory to `device` (a scratch piece: index tables, sequence bounds) on the
// default stream, without waiting for the device: pageable memory is staged at once
// (cudaMemcpyAsync), so the host memory may change as soon as the call returns.
void upload(void* device, const void* host, size_t bytes);

// The same layout in memory the caller owns: carved_bytes is the size a buffer needs for the
// pieces, carve their 256-byte aligned places in one that starts 256-byte aligned.
size_t carved_bytes(const std::vector<size_t>& piece_bytes);
std::vector<void*> carve(void* base, const std::vector<size_t>& piece_bytes);

}  // namespace linea::cuda
