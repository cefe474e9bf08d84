#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "kernels/cuda/check.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/scratch.h"

namespace linea::cuda {

namespace {
constexpr size_t kAlignment = 256;
constexpr size_t align_up(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

struct Buffer {
  std::shared_ptr<void> memory;
  size_t bytes = 0;
};
}  // namespace

size_t carved_bytes(const std::vector<size_t>& piece_bytes) {
  size_t total = 0;
  for (size_t bytes : piece_bytes) total += align_up(bytes);
  return total;
}

std::vector<void*> carve(void* base, const std::vector<size_t>& piece_bytes) {
  std::vector<void*> pieces;
  char* next = static_cast<char*>(base);
  for (size_t bytes : piece_bytes) {
    pieces.push_back(next);
    next += align_up(bytes);
  }
  return pieces;
}

std::vector<void*> scratch(const std::vector<size_t>& piece_bytes, int level) {
  thread_local std::map<std::pair<int, int>, Buffer> buffers;  // by device and level
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  const size_t total = carved_bytes(piece_bytes);
  Buffer& buffer = buffers[{device, level}];
  if (buffer.bytes < total) {
    buffer.memory.reset();  // free the old buffer before taking a larger one
    buffer.bytes = 0;
    buffer.memory = allocate(total);
    buffer.bytes = total;
  }
  return carve(buffer.memory.get(), piece_bytes);
}

void upload(void* device, const void* host, size_t bytes) {
  if (bytes == 0) return;
  check_cuda(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, 0), "cudaMemcpyAsync (upload)");
}

}  // namespace linea::cuda
