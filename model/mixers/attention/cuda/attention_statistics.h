// Moves attention's log-sum-exp statistics between the token-major layout of the attention ops,
// lse[(b·T + t)·H + h] ([N, H], kernels/ops.h), and the head-major one of cuDNN's dense graphs,
// stats[(b·H + h)·T + t] ([B, H, T]), for B sequences of T tokens. Device pointers; default stream.
#pragma once
#include <cstdint>

namespace linea::cuda {

void lse_to_head_major(float* stats, const float* lse, int64_t batch, int64_t seq_len, int64_t heads);
void lse_from_head_major(float* lse, const float* stats, int64_t batch, int64_t seq_len, int64_t heads);

}  // namespace linea::cuda
