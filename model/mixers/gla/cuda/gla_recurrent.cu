// The gated-linear-attention family's recurrent form on CUDA (ops::GlaImpl::recurrent's forward,
// model/mixers/gla/cuda/gla.h): decoding's one-token step, and any number of tokens per sequence.
// A block per (32 value columns, head, sequence) holds that part of the state S in registers
// (kernels/chunk/cuda/state_columns.cuh) and walks the sequence's tokens. Per token t, with a =
// exp(g_t) (a decay per key channel, per token and head, or fixed per head) and the key k = k_t or
// 1 − a (tied, HGRN-2), for each column c:
//
//   after_write:         S' = Diag(a) S,  S = S' + k vᵀ,
//                        o_c = scale · (Sᵀq)_c = scale · ((S'ᵀq)_c + (kᵀq) v_c)
//   before_write_bonus:  o_c = scale · ((Sᵀq)_c + (qᵀ(u ⊙ k)) v_c) on the previous S (RWKV-6 reads
//                        before it writes), then S = Diag(a) S + k vᵀ
//
// both as o_c = scale · (x_c + y · v_c) with the two sums over K added up over the warps at once.
// h0 is read once and ht written once; ht may be h0 itself (each state element is read and
// written by one thread only).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/chunk/cuda/state_columns.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/token_bounds.h"
#include "model/mixers/gla/cuda/gla.h"
#include "model/mixers/gla/cuda/gla_kernels.cuh"

namespace linea::cuda {

namespace gla {
namespace {

struct Recurrent {
  Call call;        // its chunk table unused
  const float* h0;  // [S, H, K, V] or null
  float* ht;        // [S, H, K, V] or null
  void* o;          // [N, H, V]
  const int64_t* cu_seqlens;
};

// g of (token t, head h, key channel d), by the decay's layout.
__device__ __forceinline__ float log_decay(const Call& c, int64_t t, int h, int d) {
  switch (c.decay) {
    case ops::GlaDecay::channel: return c.g[row_index(c, t, h) * c.key_dim + d];
    case ops::GlaDecay::scalar: return c.g[row_index(c, t, h)];
    case ops::GlaDecay::head: return c.g[h];
  }
  return 0.0f;
}

template <class T, int kRows>
__global__ void __launch_bounds__(state::kThreads) recurrent_kernel(Recurrent r) {
  const Call& c = r.call;
  const int h = blockIdx.y, s = blockIdx.z, K = c.key_dim, V = c.value_dim;
  const int64_t state_at = (int64_t{s} * c.heads + h) * K * V, begin = r.cu_seqlens[s], end = r.cu_seqlens[s + 1];
  state::Columns<kRows> S(static_cast<int>(blockIdx.x));
  S.load(r.h0 ? r.h0 + state_at : nullptr, K, V);
  __shared__ state::TokenVectors<4> staged;  // q, k, a, u ⊙ k (bonus)
  __shared__ float parts[2 * state::kWarps * state::kColumns];
  for (int64_t t = begin; t < end; ++t) {
    float(*x)[state::kMaxKeyDim] = staged.of(t - begin);
    for (int d = threadIdx.x; d < K; d += state::kThreads) {
      const float k = key<T>(c, t, h, d);
      x[0][d] = query<T>(c, t, h, d);
      x[1][d] = k;
      x[2][d] = expf(log_decay(c, t, h, d));
      if (c.bonus) x[3][d] = c.u[h * K + d] * k;
    }
    __syncthreads();
    const float v = S.column < V ? value<T>(c, t, h, S.column) : 0.0f;
    float sums[2];
    if (c.bonus) {
      sums[0] = S.dot(x[0], K);
      sums[1] = state::rows_dot<kRows>(x[0], x[3], K);
      S.decay(x[2], K);
    } else {
      S.decay(x[2], K);
      sums[0] = S.dot(x[0], K);
      sums[1] = state::rows_dot<kRows>(x[1], x[0], K);
    }
    S.rank_one(x[1], v, K);
    state::column_sums(sums, parts);
    if (S.column < V && S.warp == 0) {
      static_cast<T*>(r.o)[row_index(c, t, h) * V + S.column] = from_float<T>(c.scale * (sums[0] + sums[1] * v));
    }
  }
  if (r.ht) S.store(r.ht + state_at, K, V);
}

}  // namespace
}  // namespace gla

void gla_recurrent_forward(const ops::GlaSpec& spec, const SeqLayout& seqs, const ops::GlaInputs& in, Tensor o,
                           Tensor ht) {
  const int64_t S = seqs.num_seqs(), H = in.q.dim(1), K = in.q.dim(2), V = in.v.dim(2);
  if (S > 65535) {
    throw std::invalid_argument("gla_forward: seqs: the recurrent CUDA kernel takes at most 65535 sequences, got " +
                                std::to_string(S));
  }
  if (S == 0) return;
  const gla::Recurrent r{gla::describe_call(spec, in),
                         in.h0.defined() ? static_cast<const float*>(in.h0.raw()) : nullptr,
                         ht.defined() ? static_cast<float*>(ht.raw()) : nullptr, o.raw(), uploaded_cu_seqlens(seqs)};
  dispatch_float(in.q.dtype(), [&](auto zero) {
    using T = decltype(zero);
    state::dispatch_rows(K, [&](auto rows) {
      gla::recurrent_kernel<T, decltype(rows)::value><<<state::grid(V, H, S), state::kThreads>>>(r);
    });
  });
  check_launch("gla recurrent_kernel");
}

}  // namespace linea::cuda
