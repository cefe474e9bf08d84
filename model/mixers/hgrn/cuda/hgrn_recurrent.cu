// HGRN's recurrence token by token on CUDA (model/mixers/hgrn/cuda/hgrn.h hgrn_recurrent_forward):
// decoding's one-token step, and any number of tokens per sequence. One thread per (sequence s,
// channel c), neighbouring threads on neighbouring channels (coalesced):
//
//   h = h0[s, c];  for t in s:  h = exp(g_t,c) · h + x_t,c,  o_t,c = h;  ht[s, c] = h
//
// in f32. ht may be h0 itself (each state element is read and written by its one thread).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/element_types.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/token_bounds.h"
#include "model/mixers/hgrn/cuda/hgrn.h"

namespace linea::cuda {

namespace {

template <class T>
__global__ void recurrent_kernel(const int64_t* cu_seqlens, int64_t channels, const T* x, const float* g,
                                 const float* h0, float* ht, T* o) {
  const int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x, s = blockIdx.y;
  if (c >= channels) return;
  float h = h0 ? h0[s * channels + c] : 0.0f;
  for (int64_t t = cu_seqlens[s]; t < cu_seqlens[s + 1]; ++t) {
    const int64_t i = t * channels + c;
    h = expf(g[i]) * h + to_float(x[i]);
    o[i] = from_float<T>(h);
  }
  if (ht) ht[s * channels + c] = h;
}

}  // namespace

void hgrn_recurrent_forward(const SeqLayout& seqs, const ops::HgrnInputs& in, Tensor o, Tensor ht) {
  const int64_t S = seqs.num_seqs(), D = in.x.dim(1);
  if (S > 65535) {
    throw std::invalid_argument("hgrn_forward: seqs: the recurrent CUDA kernel takes at most 65535 sequences, got " +
                                std::to_string(S));
  }
  if (S == 0) return;
  const int64_t* cu = uploaded_cu_seqlens(seqs);
  const dim3 grid(static_cast<unsigned>(ceil_div(D, kThreadsPerBlock)), static_cast<unsigned>(S));
  dispatch_float(in.x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    recurrent_kernel<T><<<grid, kThreadsPerBlock>>>(cu, D, data_of<T>(in.x), static_cast<const float*>(in.g.raw()),
                                                    in.h0.defined() ? static_cast<const float*>(in.h0.raw()) : nullptr,
                                                    ht.defined() ? static_cast<float*>(ht.raw()) : nullptr,
                                                    data_of<T>(o));
  });
  check_launch("hgrn recurrent_kernel");
}

}  // namespace linea::cuda
