// The sequence bounds of every packed token on the device, for the CUDA ops that must not reach
// across documents (short conv, token shift): begin[t] and end[t] are the first token and one past
// the last token of t's sequence in `seqs`.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/seq_layout.h"

namespace linea::cuda {

// One scratch() call (kernels/cuda/scratch.h) of the pieces cu_seqlens, begin, end (int64 each,
// filled from seqs: an upload that does not wait for the device and one kernel, on the default
// stream), then the caller's `more`.
// The pointers stay valid until the next scratch() call.
std::vector<void*> scratch_with_token_bounds(const SeqLayout& seqs, const std::vector<size_t>& more);

// seqs.cu_seqlens (int64 [S + 1]) in the one piece of a scratch() call, uploaded without waiting for
// the device (kernels/cuda/scratch.h upload): for the kernels that walk each sequence in order.
const int64_t* uploaded_cu_seqlens(const SeqLayout& seqs);

}  // namespace linea::cuda
