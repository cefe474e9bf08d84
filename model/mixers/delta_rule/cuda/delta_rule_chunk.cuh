// What the CUDA delta-rule kernels (model/mixers/delta_rule/cuda/delta_rule_*.cu) share: one call's operands as
// the kernels see them, the table of chunks, the f32 workspaces between the kernels, the view of
// one chunk of one head (ChunkRef), and the dispatch over decay kind × gate kind. The f32 pipeline
// described here takes f32 token operands (bf16 calls go to delta_rule_bf16.h's pipeline, or to
// this one on f32 copies: delta_rule.cu).
//
// Pipeline (notation of model/mixers/delta_rule/cpu/delta_rule_chunked.h; C = 64, L ≤ C the chunk's length):
//   intra_chunk     parallel over (chunk, head): G (cumulated log decay), A, P, T = (I + A)^{-1},
//                   U = T (w ⊙ v), W = T (b ⊙ k ⊙ γ), K ⊙ exp(G_L − G), scale · Q ⊙ γ
//   state_forward   sequential over the chunks of each (sequence, head, V tile): Ũ = U − W S0 and
//                   the state entering every chunk, ht
//   output          parallel over (chunk, head): O = scale · (Q ⊙ γ) S0 + scale · P Ũ
// Backward: intra_chunk and state_forward again, then
//   written_local   parallel: dŨ = scale · Pᵀ dO (the part of ∂L/∂Ũ inside the chunk)
//   state_backward  sequential in reverse per (sequence, head, V tile): dŨ += (K ⊙ exp(G_L − G)) dS,
//                   dS ← Diag(γ_L) dS + scale (Q ⊙ γ)ᵀ dO − Wᵀ dŨ, the ∂L/∂(state at chunk end), dh0
//   chunk_gradients parallel over (chunk, head): every input gradient
//   (model/mixers/delta_rule/cuda/delta_rule_gradients.cu)
// The write error r (reference/mixers.md §5.1; model/mixers/delta_rule/cuda/delta_rule_write_error.cu), when
// asked for: write_error after output; with its gradient dR, write_error_local after written_local
// (dŨ's part from r, and −K ⊙ γ for state_backward, which then adds −(K ⊙ γ)ᵀ dR to dS), and
// write_error_gradients after chunk_gradients (dv, dk, dg's parts from r).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cuda/element_types.cuh"
#include "model/mixers/delta_rule/delta_rule.h"

namespace linea::cuda::delta {

inline constexpr int kChunk = 64;
inline constexpr int kThreads = 256;
inline constexpr int kMaxKeyDim = 256;

// Chunk c covers tokens [first[c], end[c]) of one sequence; sequence s has chunks
// [seq_chunk[s], seq_chunk[s + 1]). Device arrays.
struct Chunks {
  const int64_t* first = nullptr;
  const int64_t* end = nullptr;
  const int64_t* seq_chunk = nullptr;
  int64_t count = 0, seqs = 0;
};

// One call, type-erased (the host side: both pipelines); operands() gives the f32 kernels' view.
struct Call {
  ops::DecayKind decay = ops::DecayKind::none;
  ops::GateKind gate = ops::GateKind::beta;
  const void *q = nullptr, *k = nullptr, *v = nullptr, *beta = nullptr, *b = nullptr, *w = nullptr;
  const float* g = nullptr;
  int64_t tokens = 0;
  int heads = 0, key_dim = 0, value_dim = 0;
  float scale = 1;
  Chunks chunks;
};

struct Operands {
  const float *q, *k, *v, *beta, *b, *w;
  const float* g;
  int heads, key_dim, value_dim;
  float scale;
};

inline Operands operands(const Call& c) {
  return {static_cast<const float*>(c.q),
          static_cast<const float*>(c.k),
          static_cast<const float*>(c.v),
          static_cast<const float*>(c.beta),
          static_cast<const float*>(c.b),
          static_cast<const float*>(c.w),
          c.g,
          c.heads,
          c.key_dim,
          c.value_dim,
          c.scale};
}

// The grid of the kernels with one block per (chunk, head).
inline dim3 chunk_grid(const Call& c) {
  return dim3(static_cast<unsigned>(c.chunks.count), static_cast<unsigned>(c.heads));
}

// f32 buffers between the kernels. Per token and head ("rows", [N, H, ·]): G ([N, H] for a scalar
// decay, [N, H, K] per channel), U, Ut (= Ũ), W, Kend (= K ⊙ exp(G_L − G)), Qg (= scale · Q ⊙ γ).
// Per chunk and head: T, P ([NC, H, C, C], row-major, only i, j < L meaningful) and S (the state
// entering the chunk, [NC, H, K, V]).
struct Workspace {
  float *G, *U, *Ut, *W, *Kend, *Qg, *T, *P, *S;
};

// The backward's extra buffers: dUt (∂L/∂Ũ, [N, H, V]), dS (∂L/∂ state at the chunk's end,
// [NC, H, K, V]), and per-chunk scratch rows dX ([N, H, V]), dW, dY, dG, r, db, dQd (∂L/∂(Q ⊙ γ)),
// dKe (∂L/∂Kend) ([N, H, K]). With the write error's gradient dR of a GateKind::beta call, the
// state pass adds its term −(K ⊙ γ)ᵀ dR to dS: KgNeg = −K ⊙ γ ([N, H, K], written by
// write_error_local) and dR ([N, H, V]); both null otherwise.
struct GradWorkspace {
  float *dUt, *dS, *dX, *dW, *dY, *dG, *r, *db, *dQd, *dKe;
  float* KgNeg = nullptr;
  const float* dR = nullptr;
};

// One chunk of one head: operand access by (row i of the chunk, channel).
template <ops::DecayKind kDecay, ops::GateKind kGate>
struct ChunkRef {
  Operands x;
  const float* G;  // Workspace::G (written by intra_chunk)
  int64_t first;
  int len, head;

  __device__ ChunkRef(const Operands& operands, const Chunks& chunks, const float* cumulated, int64_t chunk, int h)
      : x(operands),
        G(cumulated),
        first(chunks.first[chunk]),
        len(static_cast<int>(chunks.end[chunk] - chunks.first[chunk])),
        head(h) {}

  // Index of (token first + i, head) in an [N, H] layout.
  __device__ int64_t row(int i) const { return (first + i) * x.heads + head; }
  __device__ int64_t key(int i, int d) const { return row(i) * x.key_dim + d; }
  __device__ int64_t value(int i, int e) const { return row(i) * x.value_dim + e; }

  __device__ float q(int i, int d) const { return x.q[key(i, d)]; }
  __device__ float k(int i, int d) const { return x.k[key(i, d)]; }
  __device__ float v(int i, int e) const { return x.v[value(i, e)]; }
  // Erase gate b (β for GateKind::beta) and write gate w (β again).
  __device__ float erase(int i, int d) const {
    if constexpr (kGate == ops::GateKind::beta) {
      return x.beta[row(i)];
    } else {
      return x.b[key(i, d)];
    }
  }
  __device__ float write(int i, int e) const {
    if constexpr (kGate == ops::GateKind::beta) {
      return x.beta[row(i)];
    } else {
      return x.w[value(i, e)];
    }
  }
  // Cumulated log decay G_{i,d} (0 without decay).
  __device__ float cumulated(int i, int d) const {
    if constexpr (kDecay == ops::DecayKind::channel) {
      return G[key(i, d)];
    } else if constexpr (kDecay == ops::DecayKind::scalar) {
      return G[row(i)];
    } else {
      return 0.0f;
    }
  }
  // γ_{i,d} = exp(G_{i,d}), exp(G_{L,d} − G_{i,d}) and exp(G_{i,d} − G_{j,d}) for j ≤ i: every
  // exponent ≤ 0.
  __device__ float gamma(int i, int d) const {
    if constexpr (kDecay == ops::DecayKind::none) return 1.0f;
    return expf(cumulated(i, d));
  }
  __device__ float to_end(int i, int d) const {
    if constexpr (kDecay == ops::DecayKind::none) return 1.0f;
    return expf(cumulated(len - 1, d) - cumulated(i, d));
  }
  __device__ float between(int i, int j, int d) const {
    if constexpr (kDecay == ops::DecayKind::none) return 1.0f;
    return expf(cumulated(i, d) - cumulated(j, d));
  }
};

// Loops that load, compute and store through global memory wait one load latency per iteration
// (a store may alias the next loads). These two run the same iterations, in the same order and
// with the same arithmetic, but load a batch of iterations before storing any of them.

// For p = threadIdx.x, + blockDim.x, … below count: store(p, compute(p)), kBatch of the thread's
// p computed before their stores.
template <int kBatch, class Compute, class Store>
__device__ void for_each_batched(int count, Compute compute, Store store) {
  using Value = decltype(compute(0));
  for (int p0 = threadIdx.x; p0 < count; p0 += kBatch * blockDim.x) {
    Value values[kBatch] = {};
#pragma unroll
    for (int r = 0; r < kBatch; ++r) {
      if (p0 + r * blockDim.x < count) values[r] = compute(p0 + r * blockDim.x);
    }
#pragma unroll
    for (int r = 0; r < kBatch; ++r) {
      if (p0 + r * blockDim.x < count) store(p0 + r * blockDim.x, values[r]);
    }
  }
}

// fn(i, load(i)) for the rows i = 0, 1, …, L − 1 of a chunk (L − 1, …, 0 with kReverse) in that
// order, one thread; load() runs for 8 rows before fn() does, for sequential sums down a column.
template <bool kReverse = false, class Load, class Fn>
__device__ void for_rows_batched(int L, Load load, Fn fn) {
  constexpr int kRowBatch = 8;
  using Value = decltype(load(0));
  for (int b = 0; b < L; b += kRowBatch) {
    Value values[kRowBatch] = {};
#pragma unroll
    for (int r = 0; r < kRowBatch; ++r) {
      if (b + r < L) values[r] = load(kReverse ? L - 1 - (b + r) : b + r);
    }
#pragma unroll
    for (int r = 0; r < kRowBatch; ++r) {
      if (b + r < L) fn(kReverse ? L - 1 - (b + r) : b + r, values[r]);
    }
  }
}

template <ops::DecayKind kDecay>
using DecayConstant = std::integral_constant<ops::DecayKind, kDecay>;
template <ops::GateKind kGate>
using GateConstant = std::integral_constant<ops::GateKind, kGate>;

// fn(DecayConstant{}, GateConstant{}) for the call's kinds.
template <class Fn>
void dispatch_kinds(const Call& call, Fn&& fn) {
  const auto with_gate = [&](auto decay) {
    if (call.gate == ops::GateKind::beta) {
      fn(decay, GateConstant<ops::GateKind::beta>{});
    } else {
      fn(decay, GateConstant<ops::GateKind::erase_write>{});
    }
  };
  switch (call.decay) {
    case ops::DecayKind::none: return with_gate(DecayConstant<ops::DecayKind::none>{});
    case ops::DecayKind::scalar: return with_gate(DecayConstant<ops::DecayKind::scalar>{});
    case ops::DecayKind::channel: return with_gate(DecayConstant<ops::DecayKind::channel>{});
  }
}

// The call's operands, dimensions and kinds (its chunks are placed by place_chunk_table).
Call describe_call(const ops::DeltaRuleSpec& spec, const ops::DeltaRuleInputs& in);
// The chunks of `seqs` as Chunks lays them out in one array: first[], end[], seq_chunk[].
std::vector<int64_t> chunk_table(const SeqLayout& seqs);
// Copies the table to `device` (its size in bytes of int64_t) and views it.
Chunks place_chunk_table(const std::vector<int64_t>& table, int64_t seqs, void* device);

// Lets `kernel` use `bytes` of dynamic shared memory (beside its static shared memory, and above
// the 48 KiB default in all), with the whole carveout for shared memory.
void allow_shared_memory(const void* kernel, size_t bytes);

// The kernels' launchers (one file each).
void intra_chunk(const Call& call, const Workspace& ws);
// h0 (may be null): [S, H, K, V]; ht (may be null) gets the final states.
void state_forward(const Call& call, const Workspace& ws, const float* h0, float* ht);
void output(const Call& call, const Workspace& ws, void* o);
void written_local(const Call& call, const Workspace& ws, const void* d_o, const GradWorkspace& gws);
// dht, dh0 may be null.
void state_backward(const Call& call, const Workspace& ws, const void* d_o, const float* dht, const GradWorkspace& gws,
                    float* dh0);
// dq, dk, dv (and dbeta or db and dw) of the call's dtype, dg f32 (null without decay).
struct GradientOutputs {
  void *dq, *dk, *dv, *dbeta, *db, *dw;
  float* dg;
};
void chunk_gradients(const Call& call, const Workspace& ws, const void* d_o, const GradWorkspace& gws,
                     const GradientOutputs& out);
// The write error r [N, H, V] (f32), after state_forward (delta_rule_write_error.cu).
void write_error(const Call& call, const Workspace& ws, float* r);
// With ∂L/∂r = dr [N, H, V] (f32), after written_local: dŨ += dr (erase_write), or dŨ −= Mᵀ dr and
// gws.KgNeg = −K ⊙ γ (beta; gws.KgNeg and gws.dR must be set for state_backward).
void write_error_local(const Call& call, const Workspace& ws, const float* dr, const GradWorkspace& gws);
// After chunk_gradients, GateKind::beta: adds r's terms to out.dv, out.dk and out.dg.
void write_error_gradients(const Call& call, const Workspace& ws, const float* dr, const GradientOutputs& out);

}  // namespace linea::cuda::delta
