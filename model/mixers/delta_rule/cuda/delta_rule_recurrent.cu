// The delta rule's recurrent form on CUDA (ops::DeltaRuleImpl::recurrent's forward,
// model/mixers/delta_rule/cuda/delta_rule.h): decoding's one-token step, and any number of tokens
// per sequence. A block per (32 value columns, head, sequence) holds that part of the state S in
// registers (kernels/chunk/cuda/state_columns.cuh) and walks the sequence's tokens. Per token t,
// with a = exp(g_t) (none: 1; one value per head or per key channel), the erase key e = b_t ⊙ k_t
// and the write gate w_t (b = w = β_t·1 for GateKind::beta), for each column c:
//
//   S' = Diag(a) S
//   u_c = w_c v_c − (S'ᵀe)_c
//   S  = S' + k uᵀ
//   o_c = scale · (Sᵀq)_c = scale · ((S'ᵀq)_c + (kᵀq) u_c)
//
// the three sums over K (S'ᵀe, S'ᵀq, kᵀq) formed in one pass over the registers and added up over
// the warps at once. h0 is read once and ht written once; ht may be h0 itself (each state element is
// read and written by one thread only).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/chunk/cuda/state_columns.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/element_types.cuh"
#include "kernels/cuda/token_bounds.h"
#include "model/mixers/delta_rule/cuda/delta_rule.h"

namespace linea::cuda {

namespace {

struct Recurrent {
  const void *q, *k, *v, *beta, *b, *w;  // token operands (T)
  const float* g;                        // log decay, or null
  const float* h0;                       // [S, H, K, V] or null
  float* ht;                             // [S, H, K, V] or null
  void* o;
  const int64_t* cu_seqlens;
  int heads, key_dim, value_dim;
  float scale;
  ops::DecayKind decay;
  ops::GateKind gate;
};

template <class T, int kRows>
__global__ void __launch_bounds__(state::kThreads) recurrent_kernel(Recurrent c) {
  const int h = blockIdx.y, s = blockIdx.z, H = c.heads, K = c.key_dim, V = c.value_dim;
  const T *q = static_cast<const T*>(c.q), *k = static_cast<const T*>(c.k), *v = static_cast<const T*>(c.v);
  const bool beta_gate = c.gate == ops::GateKind::beta;
  const int64_t state_at = (int64_t{s} * H + h) * K * V, begin = c.cu_seqlens[s], end = c.cu_seqlens[s + 1];
  state::Columns<kRows> S(static_cast<int>(blockIdx.x));
  S.load(c.h0 ? c.h0 + state_at : nullptr, K, V);
  __shared__ state::TokenVectors<4> staged;  // q, k, e, a
  __shared__ float parts[3 * state::kWarps * state::kColumns];
  for (int64_t t = begin; t < end; ++t) {
    float(*x)[state::kMaxKeyDim] = staged.of(t - begin);
    const int64_t row = t * H + h;
    const float beta = beta_gate ? to_float(static_cast<const T*>(c.beta)[row]) : 0.0f;
    for (int d = threadIdx.x; d < K; d += state::kThreads) {
      const float key = to_float(k[row * K + d]);
      x[0][d] = to_float(q[row * K + d]);
      x[1][d] = key;
      x[2][d] = (beta_gate ? beta : to_float(static_cast<const T*>(c.b)[row * K + d])) * key;
      if (c.decay != ops::DecayKind::none) {
        x[3][d] = expf(c.decay == ops::DecayKind::scalar ? c.g[row] : c.g[row * K + d]);
      }
    }
    __syncthreads();
    if (c.decay != ops::DecayKind::none) S.decay(x[3], K);
    float sums[3] = {S.dot(x[2], K), S.dot(x[0], K), state::rows_dot<kRows>(x[1], x[0], K)};
    state::column_sums(sums, parts);
    float u = 0.0f;
    if (S.column < V) {
      const float w = beta_gate ? beta : to_float(static_cast<const T*>(c.w)[row * V + S.column]);
      u = w * to_float(v[row * V + S.column]) - sums[0];
      if (S.warp == 0) static_cast<T*>(c.o)[row * V + S.column] = from_float<T>(c.scale * (sums[1] + sums[2] * u));
    }
    S.rank_one(x[1], u, K);
  }
  if (c.ht) S.store(c.ht + state_at, K, V);
}

}  // namespace

void delta_rule_recurrent_forward(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in,
                                  Tensor o, Tensor ht) {
  const int64_t S = seqs.num_seqs(), H = in.q.dim(1), K = in.q.dim(2), V = in.v.dim(2);
  if (S > 65535) {
    throw std::invalid_argument(
        "delta_rule_forward: seqs: the recurrent CUDA kernel takes at most 65535 sequences, got " + std::to_string(S));
  }
  if (S == 0) return;
  const auto raw = [](const Tensor& t) { return t.defined() ? t.raw() : nullptr; };
  const Recurrent call{raw(in.q),
                       raw(in.k),
                       raw(in.v),
                       raw(in.beta),
                       raw(in.b),
                       raw(in.w),
                       static_cast<const float*>(raw(in.g)),
                       static_cast<const float*>(raw(in.h0)),
                       static_cast<float*>(raw(ht)),
                       o.raw(),
                       uploaded_cu_seqlens(seqs),
                       static_cast<int>(H),
                       static_cast<int>(K),
                       static_cast<int>(V),
                       static_cast<float>(spec.scale),
                       spec.decay,
                       spec.gate};
  dispatch_float(in.q.dtype(), [&](auto zero) {
    using T = decltype(zero);
    state::dispatch_rows(K, [&](auto rows) {
      recurrent_kernel<T, decltype(rows)::value><<<state::grid(V, H, S), state::kThreads>>>(call);
    });
  });
  check_launch("delta_rule recurrent_kernel");
}

}  // namespace linea::cuda
