// What the CUDA kernels of the gated-linear-attention family (model/mixers/gla/cuda/gla_*.cu)
// share: one call as the kernels see it, the f32 workspaces between them, operand access per
// (token, head, channel), and the launchers. The table of chunks (64 tokens, never across a
// sequence) is the delta rule's (model/mixers/delta_rule/cuda/delta_rule_chunk.cuh).
//
// Notation of model/mixers/gla/cpu/gla_chunked.h, per chunk of L ≤ C = 64 tokens of one head: G_i
// the log decay cumulated from the chunk start (per key channel d, or one value per token), R_i the
// readout's log decay (G_i, or G_{i−1} with R_0 = 0 for the bonus readout, which reads S_{t−1}),
// shift = 1 for the bonus readout (else 0), S0 the state entering the chunk, dS = ∂L/∂ the state at
// its end:
//
//   P_ij  = Σ_d q_id k_jd exp(R_id − G_jd)  (j ≤ i; j < i for the bonus readout, whose diagonal is
//           P_ii = Σ_d q_id u_d k_id)
//   O     = scale (Q ⊙ exp(R)) S0 + scale P V
//   S_end = Diag(exp(G_{L−1})) S0 + (K ⊙ exp(G_{L−1} − G))ᵀ V
//
// Every exponent is ≤ 0 (G falls along the chunk and the pairs are causal), so nothing
// overflows. G is cumulated and kept in f64: a difference G_i − G_j of two large cumulated decays
// (strong decays reach G ≈ −4000 within a chunk) keeps its few significant digits, which f32
// sums would lose; everything else is f32 on the CUDA cores, each sum in a fixed order. Pipeline:
//   cumulate        per (chunk, head): G                                          (gla_intra.cu)
//   gram            per (chunk, head): P                                          (gla_intra.cu)
//   state_forward   per (sequence, head, 32 value columns), the chunks in order: O, ht; for the
//                   backward the state entering each chunk (h)                    (gla_state.cu)
//   state_backward  the same in reverse: dS at each chunk's end (dh), dh0         (gla_state.cu)
//   output_gram     per (chunk, head): dP = scale dO Vᵀ (j ≤ i)                   (gla_intra.cu)
//   value_gradient  per (chunk, head, 32 value columns): dV                      (gla_gradients.cu)
//   key_gradients   per (chunk, head): dQ, dK, dg, the chunk's part of du        (gla_gradients.cu)
//   bonus_gradient  du = Σ over chunks of the parts, in chunk order              (gla_gradients.cu)
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/element_types.cuh"
#include "model/mixers/delta_rule/cuda/delta_rule_chunk.cuh"
#include "model/mixers/gla/gla.h"

namespace linea::cuda::gla {

inline constexpr int kC = delta::kChunk;  // 64 tokens a chunk
inline constexpr int kThreads = 256;      // 8 warps
inline constexpr int kTile = 32;          // channels (or value columns) of a staged tile
inline constexpr int kPitch = kTile + 1;  // row pitch of a staged [kC][kTile] tile (no bank conflicts)

// One call. Token operands (q, k, v) in the call's dtype (bf16 or f32: `bf16`), k null when tied to
// the decay (k = 1 − exp(g)); g the log decays as given: [N, H, K] (channel), [N, H] (scalar) or
// [H] (head); u [H, K] for the bonus readout, else null.
struct Call {
  const void *q, *k, *v;
  const float *g, *u;
  delta::Chunks chunks;
  int heads, key_dim, value_dim;
  float scale;
  ops::GlaDecay decay;
  bool tied, bonus, bf16;
};

// The per-token width of G: K for a decay per channel, else 1.
__host__ __device__ inline int decay_width(const Call& c) { return c.decay == ops::GlaDecay::channel ? c.key_dim : 1; }

// Buffers: G [N, H, decay_width] f64 (G_i, cumulated within the chunk); f32 P, dP [NC, H, C, C]
// (row-major, zero outside i, j < L and the causal pairs); h (S0 of each chunk) and dh (dS at each
// chunk's end) [NC, H, K, V]; du_parts [NC, H, K]. Null where a call does not need them.
struct Workspace {
  double* G;
  float *P, *h, *dh, *dP, *du_parts;
};

// The gradients: dq, dk (null when tied), dv in the call's dtype; dg (null for a fixed decay), du
// (null without the bonus) in f32.
struct Outputs {
  void *dq, *dk, *dv;
  float *dg, *du;
};

struct Span {
  int64_t first;
  int len;
};
__device__ __forceinline__ Span chunk_span(const Call& c, int64_t chunk) {
  return {c.chunks.first[chunk], static_cast<int>(c.chunks.end[chunk] - c.chunks.first[chunk])};
}

// The call of ops::gla_forward / gla_backward's arguments (gla.cu), without its chunk table.
Call describe_call(const ops::GlaSpec& spec, const ops::GlaInputs& in);

// Index of (token t, head h) in an [N, H] layout.
__device__ __forceinline__ int64_t row_index(const Call& c, int64_t t, int h) { return t * c.heads + h; }

template <class T>
__device__ __forceinline__ float token_value(const void* p, int64_t i) {
  return to_float(static_cast<const T*>(p)[i]);
}
template <class T>
__device__ __forceinline__ float query(const Call& c, int64_t t, int h, int d) {
  return token_value<T>(c.q, row_index(c, t, h) * c.key_dim + d);
}
// k_td, given or 1 − exp(g_td) (as −expm1, exact for small |g|).
template <class T>
__device__ __forceinline__ float key(const Call& c, int64_t t, int h, int d) {
  const int64_t i = row_index(c, t, h) * c.key_dim + d;
  return c.tied ? -expm1f(c.g[i]) : token_value<T>(c.k, i);
}
template <class T>
__device__ __forceinline__ float value(const Call& c, int64_t t, int h, int e) {
  return token_value<T>(c.v, row_index(c, t, h) * c.value_dim + e);
}

// G and R of chunk row i (< L), channel d.
__device__ __forceinline__ double cumulated(const Call& c, const double* G, const Span& s, int h, int i, int d) {
  const int w = decay_width(c);
  return G[row_index(c, s.first + i, h) * w + (w == 1 ? 0 : d)];
}
__device__ __forceinline__ double readout_decay(const Call& c, const double* G, const Span& s, int h, int i, int d) {
  if (!c.bonus) return cumulated(c, G, s, h, i, d);
  return i == 0 ? 0.0 : cumulated(c, G, s, h, i - 1, d);
}
// exp(a − b) of two cumulated log decays, the difference taken in f64.
__device__ __forceinline__ float decay_between(double a, double b) { return expf(static_cast<float>(a - b)); }

inline constexpr int kColumns = 32;                     // value columns of a state block (or a tile)
inline constexpr int kRowGroups = kThreads / kColumns;  // 8: thread (r, e) = (threadIdx / 32, threadIdx % 32)

// tile[i][e] = x[(t_i, h), e0 + e] of an [N, H, V] tensor in T, zero past L or V.
template <class T>
__device__ void load_column_tile(const Call& c, const void* x, const Span& s, int h, int e0, float* tile) {
  for (int p = threadIdx.x; p < kC * kColumns; p += kThreads) {
    const int i = p / kColumns, e = e0 + p % kColumns;
    tile[p] = i < s.len && e < c.value_dim ? token_value<T>(x, row_index(c, s.first + i, h) * c.value_dim + e) : 0.0f;
  }
}

// Index of state entry (d, e) of (stack entry n, head h) in an [n, H, K, V] stack.
__device__ __forceinline__ int64_t state_index(const Call& c, int64_t n, int h, int d, int e) {
  return ((n * c.heads + h) * static_cast<int64_t>(c.key_dim) + d) * c.value_dim + e;
}

// The launchers.
void cumulate(const Call& c, const Workspace& ws);
void gram(const Call& c, const Workspace& ws);
// o null: no output; ws.h null: the states entering the chunks are not kept. h0, ht may be null.
void state_forward(const Call& c, const Workspace& ws, const float* h0, float* ht, void* o);
// dht, dh0 may be null.
void state_backward(const Call& c, const Workspace& ws, const void* d_o, const float* dht, float* dh0);
void output_gram(const Call& c, const Workspace& ws, const void* d_o);
void value_gradient(const Call& c, const Workspace& ws, const void* d_o, void* dv);
void key_gradients(const Call& c, const Workspace& ws, const void* d_o, const Outputs& out);
void bonus_gradient(const Call& c, const Workspace& ws, float* du);

}  // namespace linea::cuda::gla
