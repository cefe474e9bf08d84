// Sequence bounds per token (kernels/cuda/token_bounds.h): for token t, the last s with
// cu_seqlens[s] ≤ t (binary search) gives begin[t] = cu_seqlens[s], end[t] = cu_seqlens[s + 1].
#include "kernels/cuda/check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/token_bounds.h"

namespace linea::cuda {

namespace {
__global__ void token_bounds_kernel(int64_t* begin, int64_t* end, const int64_t* cu_seqlens, int64_t seqs,
                                    int64_t tokens) {
  for (int64_t t = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < tokens; t += int64_t{gridDim.x} * blockDim.x) {
    int64_t lo = 0, hi = seqs;  // cu_seqlens[lo] ≤ t < cu_seqlens[hi]
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      if (cu_seqlens[mid] <= t) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    begin[t] = cu_seqlens[lo];
    end[t] = cu_seqlens[lo + 1];
  }
}
}  // namespace

std::vector<void*> scratch_with_token_bounds(const SeqLayout& seqs, const std::vector<size_t>& more) {
  const size_t per_token = static_cast<size_t>(seqs.num_tokens()) * sizeof(int64_t);
  std::vector<size_t> sizes = {seqs.cu_seqlens.size() * sizeof(int64_t), per_token, per_token};
  sizes.insert(sizes.end(), more.begin(), more.end());
  const std::vector<void*> pieces = scratch(sizes);
  int64_t* cu = static_cast<int64_t*>(pieces[0]);
  upload(cu, seqs.cu_seqlens.data(), sizes[0]);
  if (seqs.num_tokens() > 0) {
    token_bounds_kernel<<<grid_stride_blocks(seqs.num_tokens()), kThreadsPerBlock>>>(
        static_cast<int64_t*>(pieces[1]), static_cast<int64_t*>(pieces[2]), cu, seqs.num_seqs(), seqs.num_tokens());
    check_launch("token_bounds_kernel");
  }
  return pieces;
}

const int64_t* uploaded_cu_seqlens(const SeqLayout& seqs) {
  const size_t bytes = seqs.cu_seqlens.size() * sizeof(int64_t);
  void* cu = scratch({bytes})[0];
  upload(cu, seqs.cu_seqlens.data(), bytes);
  return static_cast<const int64_t*>(cu);
}

}  // namespace linea::cuda
