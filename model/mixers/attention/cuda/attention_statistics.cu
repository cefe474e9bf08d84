#include "kernels/cuda/check.h"
#include "kernels/cuda/launch.h"
#include "model/mixers/attention/cuda/attention_statistics.h"

namespace linea::cuda {

namespace {

// Over every head-major index i = (b·H + h)·T + t, with j = (b·T + t)·H + h the token-major one:
// dst[i] = src[j] (kToHeadMajor) or dst[j] = src[i].
template <bool kToHeadMajor>
__global__ void move_kernel(float* dst, const float* src, int64_t total, int64_t seq_len, int64_t heads) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i % seq_len, h = i / seq_len % heads, b = i / (seq_len * heads);
    const int64_t j = (b * seq_len + t) * heads + h;
    if constexpr (kToHeadMajor) {
      dst[i] = src[j];
    } else {
      dst[j] = src[i];
    }
  }
}

template <bool kToHeadMajor>
void move(float* dst, const float* src, int64_t batch, int64_t seq_len, int64_t heads) {
  const int64_t total = batch * seq_len * heads;
  if (total == 0) return;
  move_kernel<kToHeadMajor><<<grid_stride_blocks(total), kThreadsPerBlock>>>(dst, src, total, seq_len, heads);
  check_launch("attention statistics move_kernel");
}

}  // namespace

void lse_to_head_major(float* stats, const float* lse, int64_t batch, int64_t seq_len, int64_t heads) {
  move<true>(stats, lse, batch, seq_len, heads);
}

void lse_from_head_major(float* lse, const float* stats, int64_t batch, int64_t seq_len, int64_t heads) {
  move<false>(lse, stats, batch, seq_len, heads);
}

}  // namespace linea::cuda
