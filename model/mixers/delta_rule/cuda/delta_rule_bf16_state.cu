// The two sequential passes of the bf16 pipeline (model/mixers/delta_rule/cuda/delta_rule_bf16.cuh), one block of 8
// warps per (sequence, head, 64 value columns e0..): the state's columns never mix, so V splits
// across blocks. The state tile S [Kd, 64] stays in f32 registers (StateLayout), with a bf16 copy
// in shared memory as the operand of the products that read it.
//
// state_forward, chunks in order, S = h0 (or 0) at the sequence start; per chunk:
//   h = S (stored when asked)
//   A: Ũ = U − W S;  with O: Q' S (one pass over the key depth, S's fragments shared), then
//      O = Q' S + R V (Q' and R from intra; GDN-2: V' = w ⊙ V for V); Ũ (stored when asked) and
//      Ũ ⊙ exp(G_L − G) to shared memory
//   B: S ← γ_L S + Kᵀ (Ũ ⊙ exp(G_L − G))
//   after the last chunk: ht = S.
// state_backward, chunks in reverse, dS = dht (or 0) at the sequence end; per chunk:
//   dh = dS (stored)
//   A: Pᵀ = K Qᵀ, K dS;  (scale e ⊙ Pᵀ) (i ≥ j) to shared memory, scale γ ⊙ dO too
//   B: dŨ = exp(G_L − G) ⊙ (K dS) + (scale e ⊙ Pᵀ) dO   (stored; −dŨ kept in shared memory)
//   C: dS ← γ_L dS + Qᵀ (scale γ ⊙ dO) + Wᵀ (−dŨ)
//   at the sequence start: dh0 = dS.
// A plain write (Problem::plain) has W = 0: the W products are skipped, Ũ = U = V (with the
// output, its V tile serves as U).
// A decay per channel (γ_L a vector: the state's rows decay each by its own) reads what intra
// stored: K ⊙ exp(G_L − G) for K (and no exp(G_L − G) on Ũ or dŨ), G_L; backward also scale Q ⊙ γ
// for Q (dO as it is) and scale P instead of forming it from K Qᵀ.
// The results of A and B are 64 × 64: warp w takes rows 16 (w % 4).., columns 32 (w / 4)...
// Tiles (Kd = 128): forward W, Q', U, two K, S, Ũ ⊙ exp(G_L − G), R, V: 112 KB, two blocks a
// multiprocessor; backward two Q, K, W, dO, dS, Pᵀ, −dŨ, γ dO: 112 KB (Kd = 256: 192 KB, one). The next chunk's tiles
// are copied (cp.async) while the current one computes: forward, all of them during B (K into the other buffer);
// backward, K, dO, G and Q (other buffer) during C, and W during A and B.
#include "kernels/cuda/check.h"
#include "model/mixers/delta_rule/cuda/delta_rule_bf16.cuh"

namespace linea::cuda::delta::bf16path {

namespace {

// Per block: sequence `seq`, head, value columns e0.., and the sequence's chunks [begin, end). The
// blocks are numbered with the value tile fastest, so that the blocks reading the same chunk's
// rows run side by side (their second reads hit L2).
struct Block {
  int64_t seq, begin, end;
  int head, e0;
  __device__ Block(const Chunks& chunks, int heads, int tiles) {
    const int64_t x = blockIdx.x;
    e0 = static_cast<int>(x % tiles) * kBV;
    head = static_cast<int>(x / tiles % heads);
    seq = x / tiles / heads;
    begin = chunks.seq_chunk[seq];
    end = chunks.seq_chunk[seq + 1];
  }
};

__host__ __device__ inline int value_tiles(const Problem& p) { return (p.value_dim + kBV - 1) / kBV; }

// The block's sequence and head of a stack of states [S, H, K, V] (null stays null).
template <class T>
__device__ T* state_of(T* states, const Block& blk, const Problem& p) {
  return states ? states + (blk.seq * p.heads + blk.head) * static_cast<int64_t>(p.key_dim) * p.value_dim : nullptr;
}

// acc ← the block's columns of the [K, V] f32 state at `from`, or 0 (from null, or outside K × V).
template <int Kd>
__device__ void load_state(StateAcc<Kd>& acc, const float* from, int K, int V, int e0) {
  for_state<Kd>(acc, [&](int d, int e, float& v0, float& v1) {
    const bool inside = from && d < K && e0 + e < V;  // V even: e + 1 too
    v0 = inside ? from[static_cast<int64_t>(d) * V + e0 + e] : 0.0f;
    v1 = inside ? from[static_cast<int64_t>(d) * V + e0 + e + 1] : 0.0f;
  });
}
template <int Kd>
__device__ void save_state(StateAcc<Kd>& acc, float* to, int K, int V, int e0) {
  for_state<Kd>(acc, [&](int d, int e, float& v0, float& v1) {
    if (d < K && e0 + e < V) {
      to[static_cast<int64_t>(d) * V + e0 + e] = v0;
      to[static_cast<int64_t>(d) * V + e0 + e + 1] = v1;
    }
  });
}
// The bf16 copy [Kd, 64] of the state tile (entries come in pairs along a row).
template <int Kd>
__device__ void copy_state(StateAcc<Kd>& acc, const Tile<kBV>& to) {
  for_state<Kd>(acc, [&](int d, int e, float& v0, float& v1) { put(to, d, e, v0, v1); });
}

// The decay factors exp(G_L,d) of the thread's state rows d, from G_L in shared memory (a decay
// per channel), and the state scaled by them.
template <int Kd>
using RowFactors = float[StateLayout<Kd>::kRowTiles][2];
template <int Kd>
__device__ void row_factors(RowFactors<Kd>& f, const float* G_last) {
#pragma unroll
  for (int m = 0; m < StateLayout<Kd>::kRowTiles; ++m) {
    const int d = StateLayout<Kd>::row0(m) + (mma::lane_id() >> 2);
    f[m][0] = expf(G_last[d]);
    f[m][1] = expf(G_last[d + 8]);
  }
}
template <int Kd>
__device__ void scale_rows(StateAcc<Kd>& acc, const RowFactors<Kd>& f) {
#pragma unroll
  for (int m = 0; m < StateLayout<Kd>::kRowTiles; ++m) {
#pragma unroll
    for (int n = 0; n < StateLayout<Kd>::kColTiles; ++n) {
      acc[m][n][0] *= f[m][0], acc[m][n][1] *= f[m][0];
      acc[m][n][2] *= f[m][1], acc[m][n][3] *= f[m][1];
    }
  }
}

// The chunk's decay values: G of its rows (scalar decay) or G_L of the key channels (per channel).
template <int Kd, ops::DecayKind kDecay>
__device__ void stage_decay(float* G, const Problem& p, const Workspace& ws, const Span& s, int64_t c, int head) {
  if constexpr (kDecay == ops::DecayKind::scalar) stage_row_values(G, ws.G, s, p.heads, head);
  if constexpr (kDecay == ops::DecayKind::channel) {
    stage_vector(G, ws.Glast + (c * p.heads + head) * static_cast<int64_t>(p.key_dim), p.key_dim, Kd);
  }
}
template <int Kd, ops::DecayKind kDecay>
inline constexpr int kDecayValues = kDecay == ops::DecayKind::channel ? Kd : kC;

// acc += Aᵀ B over the chunk's 64 rows: A a [64, Kd] tile (rows of tokens), B [64, 64]; the
// thread's state entries.
template <int Kd>
__device__ __forceinline__ void add_transposed_product(StateAcc<Kd>& acc, const Tile<Kd>& a, const Tile<kBV>& b) {
  using SL = StateLayout<Kd>;
#pragma unroll
  for (int m = 0; m < SL::kRowTiles; ++m) {
    mma::product<mma::Hold::transposed, mma::Hold::as_is>(acc[m], a, SL::row0(m), b, SL::col0(), kC);
  }
}

// ---- forward -------------------------------------------------------------------------------------

template <int Kd>
struct ForwardShared {
  Tile<Kd> W, Qe, K0;  // K0: the first of two K buffers (K(b))
  Tile<kBV> U, S, Ut_end, R, V;
  __device__ Tile<Kd> K(int b) const { return {K0.data + b * kC * Kd}; }
  // [64, Kd] tiles first, then U, S [Kd, 64], Ũ ⊙ exp(G_L − G), R and V.
  __device__ explicit ForwardShared(unsigned char* base) {
    bf16* const p = reinterpret_cast<bf16*>(base);
    bf16* const q = p + 4 * kC * Kd;
    W.data = p, Qe.data = p + kC * Kd, K0.data = p + 2 * kC * Kd;
    U.data = q, S.data = q + kC * kBV;
    Ut_end.data = S.data + Kd * kBV, R.data = Ut_end.data + kC * kBV, V.data = R.data + kC * kBV;
  }
  static constexpr size_t bytes() { return sizeof(bf16) * (4 * kC * Kd + 4 * kC * kBV + Kd * kBV); }
};

template <int Kd, ops::DecayKind kDecayKind, bool kOutput>
__global__ void __launch_bounds__(kThreads, Kd <= 128 ? 2 : 1)
    state_forward_kernel(Problem p, Workspace ws, const float* h0, float* ht, bf16* o) {
  constexpr bool kDecay = kDecayKind == ops::DecayKind::scalar, kChannel = kDecayKind == ops::DecayKind::channel;
  extern __shared__ __align__(128) unsigned char shared[];
  const ForwardShared<Kd> sm(shared);
  __shared__ __align__(16) float G[kDecayValues<Kd, kDecayKind>];
  const Block blk(p.chunks, p.heads, value_tiles(p));
  const int H = p.heads, K = p.key_dim, V = p.value_dim, e0 = blk.e0, head = blk.head;
  const int m0 = warp_row0(), n0 = 32 * warp_half();

  StateAcc<Kd> S;
  load_state<Kd>(S, state_of(h0, blk, p), K, V, e0);
  copy_state<Kd>(S, sm.S);
  const bool u_is_v = kOutput && p.plain;  // Ũ = U = V: the output's V tile serves as U
  const Tile<kBV>& U = u_is_v ? sm.V : sm.U;
  const auto stage = [&](int64_t c, int kb) {
    const Span s = chunk_span(p.chunks, c);
    if (!p.plain) stage_rows(sm.W, ws.W, s, H, head, K, 0);
    stage_rows(sm.K(kb), kChannel ? ws.Kend : p.k, s, H, head, K, 0);
    if (!u_is_v) stage_rows(sm.U, ws.U, s, H, head, V, e0);
    if constexpr (kOutput) {
      stage_rows(sm.Qe, ws.Qe, s, H, head, K, 0);
      stage_rows(sm.V, ws.Vw ? ws.Vw : p.v, s, H, head, V, e0);
      stage_matrix(sm.R, ws.R + (c * H + head) * kC * kC, kC, kC, kC, kC, 0);
    }
    stage_decay<Kd, kDecayKind>(G, p, ws, s, c, head);
    mma::commit_copies();
  };
  if (blk.begin < blk.end) stage(blk.begin, 0);

  for (int64_t c = blk.begin; c < blk.end; ++c) {
    const int kb = static_cast<int>((c - blk.begin) & 1);
    const Span s = chunk_span(p.chunks, c);
    const int L = s.len;
    mma::wait_copies<0>();
    __syncthreads();
    if (ws.h) store_matrix(ws.h + (c * H + head) * static_cast<int64_t>(K) * V, sm.S, Kd, K, V, V, e0);

    // A: one pass over the key depth for W S and Q' S.
    float ws_[4][4] = {}, o_[4][4] = {};
#pragma unroll 2
    for (int k = 0; k < Kd; k += 16) {
      uint32_t aw[4], aq[4];
      if (!p.plain) mma::a_mk(aw, sm.W, m0, k);
      if constexpr (kOutput) mma::a_mk(aq, sm.Qe, m0, k);
#pragma unroll
      for (int j = 0; j < 4; j += 2) {
        uint32_t bs[2][2];
        mma::b_kn(bs, sm.S, k, n0 + 8 * j);
        if (!p.plain) {
          mma::mma(ws_[j], aw, bs[0]);
          mma::mma(ws_[j + 1], aw, bs[1]);
        }
        if constexpr (kOutput) {
          mma::mma(o_[j], aq, bs[0]);
          mma::mma(o_[j + 1], aq, bs[1]);
        }
      }
    }
    const float G_last = kDecay ? G[L - 1] : 0.0f;
    const int64_t row0 = s.first * H + head;
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      mma::for_pairs(ws_[n], m0, n0 + 8 * n, [&](int i, int e, float x0, float x1) {
        const float2 u = get(U, i, e);
        const float r0 = u.x - x0, r1 = u.y - x1;
        const float to_end = kDecay && i < L ? expf(G_last - G[i]) : 1.0f;
        put(sm.Ut_end, i, e, r0 * to_end, r1 * to_end);
        if (ws.Ut && i < L && e0 + e < V) put_global(ws.Ut, row0 + int64_t{i} * H, V, e0 + e, r0, r1);
      });
    }
    if constexpr (kOutput) {
      mma::product<mma::Hold::as_is, mma::Hold::as_is>(o_, sm.R, m0, sm.V, n0, kC);
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        mma::for_pairs(o_[n], m0, n0 + 8 * n, [&](int i, int e, float x0, float x1) {
          if (i < L && e0 + e < V) put_global(o, row0 + int64_t{i} * H, V, e0 + e, x0, x1);
        });
      }
    }
    RowFactors<Kd> decay_rows;
    if constexpr (kChannel) row_factors<Kd>(decay_rows, G);
    __syncthreads();
    if (c + 1 < blk.end) stage(c + 1, kb ^ 1);

    // B: the state update.
    if constexpr (kDecay) {
      const float decay = expf(G_last);
      for_state<Kd>(S, [&](int, int, float& v0, float& v1) { v0 *= decay, v1 *= decay; });
    }
    if constexpr (kChannel) scale_rows<Kd>(S, decay_rows);
    add_transposed_product<Kd>(S, sm.K(kb), sm.Ut_end);
    copy_state<Kd>(S, sm.S);
  }
  if (ht) save_state<Kd>(S, state_of(ht, blk, p), K, V, e0);
}

// ---- backward ------------------------------------------------------------------------------------

template <int Kd>
struct BackwardShared {
  Tile<Kd> Q0, K, W;  // Q0: the first of two Q buffers (Q(b))
  Tile<kBV> dO, dS, Pt, dUt_neg, dO_g;
  __device__ Tile<Kd> Q(int b) const { return {Q0.data + b * kC * Kd}; }
  // [64, Kd] tiles first, then dO, dS [Kd, 64], Pᵀ, −dŨ and γ dO.
  __device__ explicit BackwardShared(unsigned char* base) {
    bf16* const p = reinterpret_cast<bf16*>(base);
    bf16* const q = p + 4 * kC * Kd;
    Q0.data = p, K.data = p + 2 * kC * Kd, W.data = p + 3 * kC * Kd;
    dO.data = q, dS.data = q + kC * kBV;
    Pt.data = dS.data + Kd * kBV, dUt_neg.data = Pt.data + kC * kBV, dO_g.data = dUt_neg.data + kC * kBV;
  }
  static constexpr size_t bytes() { return sizeof(bf16) * (4 * kC * Kd + 4 * kC * kBV + Kd * kBV); }
};

template <int Kd, ops::DecayKind kDecayKind>
__global__ void __launch_bounds__(kThreads, Kd <= 128 ? 2 : 1)
    state_backward_kernel(Problem p, Workspace ws, const bf16* d_o, const float* dht, float* dh0) {
  constexpr bool kDecay = kDecayKind == ops::DecayKind::scalar, kChannel = kDecayKind == ops::DecayKind::channel;
  extern __shared__ __align__(128) unsigned char shared[];
  const BackwardShared<Kd> sm(shared);
  __shared__ __align__(16) float G[kDecayValues<Kd, kDecayKind>];
  const Block blk(p.chunks, p.heads, value_tiles(p));
  const int H = p.heads, K = p.key_dim, V = p.value_dim, e0 = blk.e0, head = blk.head;
  const int m0 = warp_row0(), n0 = 32 * warp_half();

  StateAcc<Kd> dS;
  load_state<Kd>(dS, state_of(dht, blk, p), K, V, e0);
  copy_state<Kd>(dS, sm.dS);
  // Phase A and B's tiles of chunk c, Q into buffer qb (a decay per channel: scale Q ⊙ γ, and P).
  const auto stage = [&](int64_t c, int qb) {
    const Span s = chunk_span(p.chunks, c);
    stage_rows(sm.Q(qb), kChannel ? ws.Qg : p.q, s, H, head, K, 0);
    stage_rows(sm.K, kChannel ? ws.Kend : p.k, s, H, head, K, 0);
    stage_rows(sm.dO, d_o, s, H, head, V, e0);
    if constexpr (kChannel) stage_matrix(sm.Pt, ws.P + (c * H + head) * kC * kC, kC, kC, kC, kC, 0);
    stage_decay<Kd, kDecayKind>(G, p, ws, s, c, head);
    mma::commit_copies();
  };
  if (blk.begin < blk.end) stage(blk.end - 1, 0);

  for (int64_t c = blk.end - 1; c >= blk.begin; --c) {
    const int qb = static_cast<int>((blk.end - 1 - c) & 1);
    const Span s = chunk_span(p.chunks, c);
    const int L = s.len;
    mma::wait_copies<0>();
    __syncthreads();
    if (!p.plain) stage_rows(sm.W, ws.W, s, H, head, K, 0);  // for C, landing during A and B
    mma::commit_copies();
    if (ws.dh) store_matrix(ws.dh + (c * H + head) * static_cast<int64_t>(K) * V, sm.dS, Kd, K, V, V, e0);
    // scale γ ⊙ dO (a decay per channel: dO, scale γ is on Q), 8 entries a thread at a time.
    for (int q = threadIdx.x; q < kC * kBV / 8; q += blockDim.x) {
      const int i = q / (kBV / 8), e = 8 * (q % (kBV / 8));
      const float f = kChannel ? 1.0f : kDecay && i < L ? p.scale * expf(G[i]) : p.scale;
      uint4 v = *reinterpret_cast<const uint4*>(sm.dO.at(i, e));
      uint32_t* w = reinterpret_cast<uint32_t*>(&v);
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float2 x = mma::unpack(w[r]);
        w[r] = mma::pack(f * x.x, f * x.y);
      }
      *reinterpret_cast<uint4*>(sm.dO_g.at(i, e)) = v;
    }

    // A: K Qᵀ and K dS in one pass over the key depth (rows j of the chunk; K dS alone with P
    // from intra).
    float kq[4][4] = {}, du[4][4] = {};
#pragma unroll 2
    for (int k = 0; k < Kd; k += 16) {
      uint32_t ak[4];
      mma::a_mk(ak, sm.K, m0, k);
#pragma unroll
      for (int j = 0; j < 4; j += 2) {
        uint32_t bd[2][2];
        mma::b_kn(bd, sm.dS, k, n0 + 8 * j);
        mma::mma(du[j], ak, bd[0]);
        mma::mma(du[j + 1], ak, bd[1]);
        if constexpr (!kChannel) {
          uint32_t bq[2][2];
          mma::b_nk(bq, sm.Q(qb), k, n0 + 8 * j);
          mma::mma(kq[j], ak, bq[0]);
          mma::mma(kq[j + 1], ak, bq[1]);
        }
      }
    }
    const float G_last = kDecay ? G[L - 1] : 0.0f;
    if constexpr (!kChannel) {
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        mma::for_pairs(kq[n], m0, n0 + 8 * n, [&](int j, int i, float x0, float x1) {
          const auto decayed = [&](int ii, float x) {
            if (ii < j || ii >= L) return 0.0f;
            return kDecay ? p.scale * x * expf(G[ii] - G[j]) : p.scale * x;
          };
          put(sm.Pt, j, i, decayed(i, x0), decayed(i + 1, x1));
        });
        if constexpr (kDecay) {
          mma::for_entries(m0, n0 + 8 * n, [&](int j, int, int q) { du[n][q] *= j < L ? expf(G_last - G[j]) : 0.0f; });
        }
      }
    }
    __syncthreads();

    // B: dŨ, stored, and −dŨ for C (the tile holds Pᵀ, or P from intra).
    if constexpr (kChannel) {
      mma::product<mma::Hold::transposed, mma::Hold::as_is>(du, sm.Pt, m0, sm.dO, n0, kC);
    } else {
      mma::product<mma::Hold::as_is, mma::Hold::as_is>(du, sm.Pt, m0, sm.dO, n0, kC);
    }
    const int64_t row0 = s.first * H + head;
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      mma::for_pairs(du[n], m0, n0 + 8 * n, [&](int j, int e, float x0, float x1) {
        put(sm.dUt_neg, j, e, -x0, -x1);
        if (ws.dUt && j < L && e0 + e < V) put_global(ws.dUt, row0 + int64_t{j} * H, V, e0 + e, x0, x1);
      });
    }
    mma::wait_copies<0>();
    __syncthreads();
    RowFactors<Kd> decay_rows;
    if constexpr (kChannel) row_factors<Kd>(decay_rows, G);
    __syncthreads();
    if (c > blk.begin) stage(c - 1, qb ^ 1);

    // C: the state gradient.
    if constexpr (kDecay) {
      const float decay = expf(G_last);
      for_state<Kd>(dS, [&](int, int, float& v0, float& v1) { v0 *= decay, v1 *= decay; });
    }
    if constexpr (kChannel) scale_rows<Kd>(dS, decay_rows);
    add_transposed_product<Kd>(dS, sm.Q(qb), sm.dO_g);
    if (!p.plain) add_transposed_product<Kd>(dS, sm.W, sm.dUt_neg);
    copy_state<Kd>(dS, sm.dS);
  }
  if (dh0) save_state<Kd>(dS, state_of(dh0, blk, p), K, V, e0);
}

dim3 state_grid(const Problem& p) { return dim3(static_cast<unsigned>(p.chunks.seqs * p.heads * value_tiles(p))); }

template <int Kd, ops::DecayKind kDecay>
void launch_forward(const Problem& p, const Workspace& ws, const float* h0, float* ht, bf16* o) {
  const auto kernel = o ? state_forward_kernel<Kd, kDecay, true> : state_forward_kernel<Kd, kDecay, false>;
  constexpr size_t bytes = ForwardShared<Kd>::bytes();
  allow_shared_memory(reinterpret_cast<const void*>(kernel), bytes);
  kernel<<<state_grid(p), kThreads, bytes>>>(p, ws, h0, ht, o);
  check_launch("delta_rule bf16 state_forward_kernel");
}

template <int Kd, ops::DecayKind kDecay>
void launch_backward(const Problem& p, const Workspace& ws, const bf16* d_o, const float* dht, float* dh0) {
  const auto kernel = state_backward_kernel<Kd, kDecay>;
  constexpr size_t bytes = BackwardShared<Kd>::bytes();
  allow_shared_memory(reinterpret_cast<const void*>(kernel), bytes);
  kernel<<<state_grid(p), kThreads, bytes>>>(p, ws, d_o, dht, dh0);
  check_launch("delta_rule bf16 state_backward_kernel");
}

// fn(std::integral_constant<int, Kd>{}, DecayConstant{}) for the call's key tile and decay.
template <class Fn>
void dispatch_tile_decay(const Problem& p, Fn&& fn) {
  dispatch_key_tile(p.key_dim,
                    [&](auto tile) { dispatch_kinds(p.decay, p.gate, [&](auto decay, auto) { fn(tile, decay); }); });
}

}  // namespace

void state_forward(const Problem& p, const Workspace& ws, const float* h0, float* ht, bf16* o) {
  if (p.chunks.seqs == 0) return;
  dispatch_tile_decay(p, [&](auto tile, auto decay) {
    launch_forward<decltype(tile)::value, decltype(decay)::value>(p, ws, h0, ht, o);
  });
}

void state_backward(const Problem& p, const Workspace& ws, const bf16* d_o, const float* dht, float* dh0) {
  if (p.chunks.seqs == 0) return;
  dispatch_tile_decay(p, [&](auto tile, auto decay) {
    launch_backward<decltype(tile)::value, decltype(decay)::value>(p, ws, d_o, dht, dh0);
  });
}

}  // namespace linea::cuda::delta::bf16path
