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
// multiprocessor; backward two Q, K, W, dO, dS, Pᵀ, −dŨ, γ dO: 112 KB (Kd = 256: 192 KB, one).
// The next chunk's tiles are copied (cp.async) while the current one computes, each as soon as its
// place is free: forward, K (into the other buffer) from the chunk's start, the rest during B;
// backward, Q (other buffer) from the chunk's start, K from the end of A, dO, G (and P) during C,
// and the chunk's own W during A and B. A pass is a serial walk over a sequence's chunks with two
// blocks a multiprocessor, so a chunk's start waits for the copies still in flight: the early ones
// land behind the products (Kd = 128: the forward's K is 16 of the 24 KB a chunk copies without
// the output, the backward's Q and K 32 of its 40 KB).
// Addresses are formed once per thread, before the chunk loop (RowPieces, mma::TileLane): the
// thread's 16-byte pieces of every row copy keep one column and rows a multiple of 8 apart, so
// their swizzled tile offsets and global offsets advance by constants; per chunk only the chunk's
// base pointers move, and fragment addresses are the lane's offset plus compile-time offsets.
// Ũ, O and dŨ leave as whole rows, 16 bytes a thread: forward Ũ over U in place (each thread
// overwrites the U entries it read), O over R once the two warps that read R's rows are done with
// them (a 64-thread barrier), and each thread stores its pieces before it copies the next chunk's
// U and R pieces into the same places; backward dŨ from its negation's tile. The values stored
// are the same roundings as before.
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

// A thread's 16-byte pieces of a [kRows, C] tile for copies between the tile and rows of global
// memory: pieces p = threadIdx.x + kThreads j (j < kCount) at row p / (C / 8), column 8 (p % (C / 8)),
// that is one column and the rows row + kRowStep j (kRowStep a multiple of 8, so every piece has
// the thread's swizzle: piece j lies at tile offset `offset` + j kStepBytes). Row r of the tile is
// row r of a row-major matrix of `ld` elements a row, its column col0 + c at element
// start + r ld + col0 + c, of which columns < width exist: piece j is at element
// `element` + j `step`. Copies with the same C and kRows map the same pieces to the same threads.
template <int C, int kRows = kC>
struct RowPieces {
  static constexpr int kChunks = C / 8, kRowStep = kThreads / kChunks, kCount = kRows * kChunks / kThreads;
  static constexpr uint32_t kStepBytes = 2u * kRowStep * C;
  static_assert(kRowStep % 8 == 0 && kCount >= 1 && kRows % kRowStep == 0, "whole rows, 8 apart");
  int row, col;
  uint32_t offset;
  int ld, element, step;
  bool inside;
  // tid: the thread's index (thread_index).
  __device__ RowPieces(int tid, int ld_, int start, int width, int col0)
      : row(static_cast<int>(static_cast<unsigned>(tid) / kChunks)),
        col(8 * static_cast<int>(static_cast<unsigned>(tid) % kChunks)),
        offset(mma::TileLane<C>(row, col).off),
        ld(ld_),
        element(start + row * ld_ + col0 + col),
        step(kRowStep * ld_),
        inside(col0 + col < width) {}
  // The matrix whose row 0 is row `first` of t (null stays null).
  __device__ const bf16* rows_of(const bf16* t, int64_t first) const { return t ? t + first * ld : nullptr; }
  __device__ bf16* rows_of(bf16* t, int64_t first) const { return t ? t + first * ld : nullptr; }
  __device__ bool valid(int j, int valid_rows) const { return inside && row + j * kRowStep < valid_rows; }
};

// Starts copying rows < valid_rows of the matrix at `from` into the tile (the thread's pieces); entries
// outside become 0, and all of them when `from` is null.
template <int C, int kRows>
__device__ __forceinline__ void copy_in(const Tile<C>& to, const bf16* from, int valid_rows,
                                        const RowPieces<C, kRows>& rp) {
  using RP = RowPieces<C, kRows>;
  if (!from) {
#pragma unroll
    for (int j = 0; j < RP::kCount; ++j) mma::piece_at(to, rp.offset + j * RP::kStepBytes) = uint4{0, 0, 0, 0};
    return;
  }
  const uint32_t at = mma::address_at(to, rp.offset);
#pragma unroll
  for (int j = 0; j < RP::kCount; ++j) {
    const bool valid = rp.valid(j, valid_rows);
    mma::copy16(at + j * RP::kStepBytes, from + (valid ? rp.element + j * rp.step : 0), valid);
  }
}
// Stores the tile's rows < valid_rows (the thread's pieces, columns < width) to the matrix at `to`,
// negated (the sign bits of the bf16 pairs flipped) when kNegate.
template <bool kNegate = false, int C, int kRows>
__device__ __forceinline__ void copy_out(bf16* to, const Tile<C>& from, int valid_rows, const RowPieces<C, kRows>& rp) {
  using RP = RowPieces<C, kRows>;
#pragma unroll
  for (int j = 0; j < RP::kCount; ++j) {
    if (rp.valid(j, valid_rows)) {
      uint4 v = mma::piece_at(from, rp.offset + j * RP::kStepBytes);
      if constexpr (kNegate) v = uint4{v.x ^ 0x80008000u, v.y ^ 0x80008000u, v.z ^ 0x80008000u, v.w ^ 0x80008000u};
      *reinterpret_cast<uint4*>(to + rp.element + j * rp.step) = v;
    }
  }
}
// threadIdx.x, read where it is called: what is formed from it is not hoisted out of the chunk loop
// to stay in registers through the products (a few integer operations a chunk, no spills).
__device__ __forceinline__ int thread_index() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return t;
}
// Keeps the compiler from moving shared-memory reads past the asynchronous copies that follow.
__device__ __forceinline__ void compiler_fence() { asm volatile("" ::: "memory"); }
// Waits for the `count` threads of barrier `id` (whole warps; id 0 is __syncthreads').
__device__ __forceinline__ void named_barrier(int id, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
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
// The same entries as load_state's, their places formed anew from thread_index() (so that they are
// not held in registers through the chunk loop).
template <int Kd>
__device__ void save_state(StateAcc<Kd>& acc, float* to, int K, int V, int e0) {
  using SL = StateLayout<Kd>;
  const int tid = thread_index(), l = tid & 31, w = tid >> 5;
  const int d0 = (Kd >= 128 ? 16 * w : 16 * (w & 3)) + (l >> 2), c0 = (Kd >= 128 ? 0 : 32 * (w >> 2)) + 2 * (l & 3);
#pragma unroll
  for (int m = 0; m < SL::kRowTiles; ++m) {
#pragma unroll
    for (int n = 0; n < SL::kColTiles; ++n) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int d = d0 + 128 * m + 8 * r, e = c0 + 8 * n;  // row0(m) = row0(0) + 128 m
        if (d < K && e0 + e < V) {
          to[static_cast<int64_t>(d) * V + e0 + e] = acc[m][n][2 * r];
          to[static_cast<int64_t>(d) * V + e0 + e + 1] = acc[m][n][2 * r + 1];
        }
      }
    }
  }
}
// The thread's lane in the state tile [Kd, 64] (its entries of row tile m at at(128 m + 8 r, 8 n)).
template <int Kd>
__device__ mma::TileLane<kBV> state_lane(int tid) {
  const int w = tid >> 5;
  return mma::c_lane<kBV>(Kd >= 128 ? 16 * w : 16 * (w & 3), Kd >= 128 ? 0 : 32 * (w >> 2), tid & 31);
}
// The lanes of add_transposed_product.
template <int Kd>
__device__ mma::TileLane<Kd> state_a_lane(int tid) {
  const int w = tid >> 5;
  return mma::a_km_lane<Kd>(Kd >= 128 ? 16 * w : 16 * (w & 3), tid & 31);
}
template <int Kd>
__device__ mma::TileLane<kBV> state_b_lane(int tid) {
  return mma::b_kn_lane<kBV>(Kd >= 128 ? 0 : 32 * ((tid >> 5) >> 2), tid & 31);
}
// The bf16 copy [Kd, 64] of the state tile (entries come in pairs along a row); lane: state_lane.
template <int Kd>
__device__ __forceinline__ void copy_state(StateAcc<Kd>& acc, const Tile<kBV>& to, const mma::TileLane<kBV>& lane) {
  using SL = StateLayout<Kd>;
  static_assert(SL::kRowTiles == 1 || Kd >= 128, "row tiles 128 rows apart");
#pragma unroll
  for (int m = 0; m < SL::kRowTiles; ++m) {
#pragma unroll
    for (int n = 0; n < SL::kColTiles; ++n) {
      mma::word_at(to, lane.at(128 * m, 8 * n)) = mma::pack(acc[m][n][0], acc[m][n][1]);
      mma::word_at(to, lane.at(128 * m + 8, 8 * n)) = mma::pack(acc[m][n][2], acc[m][n][3]);
    }
  }
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
// thread's state entries. Lanes: a_lane = state_a_lane, b_lane = state_b_lane (StateLayout's rows
// and columns).
template <int Kd>
__device__ __forceinline__ void add_transposed_product(StateAcc<Kd>& acc, const Tile<Kd>& a,
                                                       const mma::TileLane<Kd>& a_lane, const Tile<kBV>& b,
                                                       const mma::TileLane<kBV>& b_lane) {
  using SL = StateLayout<Kd>;
#pragma unroll
  for (int m = 0; m < SL::kRowTiles; ++m) {
    mma::TileLane<Kd> am = a_lane;
    am.off = a_lane.at(0, 128 * m);  // row tile m: key columns row0(0) + 128 m
    mma::product_at<mma::Hold::transposed, mma::Hold::as_is, kC>(acc[m], a, am, b, b_lane);
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
  using mma::Hold;
  extern __shared__ __align__(128) unsigned char shared[];
  const ForwardShared<Kd> sm(shared);
  __shared__ __align__(16) float G[kDecayValues<Kd, kDecayKind>];
  const Block blk(p.chunks, p.heads, value_tiles(p));
  const int H = p.heads, K = p.key_dim, V = p.value_dim, e0 = blk.e0, head = blk.head;
  // The warp's rows and columns of A's (and O's) results, for the lanes built once.
  const int m0 = warp_row0(), n0 = 32 * warp_half();

  // The lanes of A's operands stay in registers; what the other phases address from (the thread's
  // pieces of the row copies, its other lanes) is formed where it is used, from thread_index().
  const mma::TileLane<Kd> a_rows = mma::a_mk_lane<Kd>(m0);    // W, Q' (A)
  const mma::TileLane<kBV> b_cols = mma::b_kn_lane<kBV>(n0);  // S (A), V (O)
  // W, K, Q' rows; U, V rows, Ũ and O; R.
  const auto keys = [&](int tid) { return RowPieces<Kd>(tid, H * K, head * K, K, 0); };
  const auto values = [&](int tid) { return RowPieces<kBV>(tid, H * V, head * V, V, e0); };

  StateAcc<Kd> S;
  load_state<Kd>(S, state_of(h0, blk, p), K, V, e0);
  copy_state<Kd>(S, sm.S, state_lane<Kd>(thread_index()));
  const bool u_is_v = kOutput && p.plain;  // Ũ = U = V: the output's V tile serves as U
  const Tile<kBV> U = u_is_v ? sm.V : sm.U;
  // Ũ over U in place (a plain write's U is Ũ already).
  const bool keep_ut = ws.Ut && !p.plain, store_ut = ws.Ut && !u_is_v;
  const bf16* const k_from = kChannel ? ws.Kend : p.k;
  const bf16* const v_from = ws.Vw ? ws.Vw : p.v;
  // Chunk c's tiles in two parts: K into buffer kb (the one the current chunk does not read: at
  // the chunk's start), the rest once A and O are done with their places.
  const auto stage_keys = [&](int64_t c, int kb, int tid) {
    const RowPieces<Kd> kp = keys(tid);
    copy_in(sm.K(kb), kp.rows_of(k_from, p.chunks.first[c]), chunk_span(p.chunks, c).len, kp);
  };
  const auto stage = [&](int64_t c, int tid) {
    const Span s = chunk_span(p.chunks, c);
    const RowPieces<Kd> kp = keys(tid);
    const RowPieces<kBV> vp = values(tid);
    if (!p.plain) copy_in(sm.W, kp.rows_of(ws.W, s.first), s.len, kp);
    if (!u_is_v) copy_in(sm.U, vp.rows_of(ws.U, s.first), s.len, vp);
    if constexpr (kOutput) {
      copy_in(sm.Qe, kp.rows_of(ws.Qe, s.first), s.len, kp);
      copy_in(sm.V, vp.rows_of(v_from, s.first), s.len, vp);
      copy_in(sm.R, ws.R + (c * H + head) * kC * kC, kC, RowPieces<kBV>(tid, kC, 0, kC, 0));
    }
    stage_decay<Kd, kDecayKind>(G, p, ws, s, c, head);
  };
  if (blk.begin < blk.end) {
    stage_keys(blk.begin, 0, thread_index());
    stage(blk.begin, thread_index());
    mma::commit_copies();
  }

  for (int64_t c = blk.begin; c < blk.end; ++c) {
    const int kb = static_cast<int>((c - blk.begin) & 1);
    const Span s = chunk_span(p.chunks, c);
    const int L = s.len;
    mma::wait_copies<0>();
    __syncthreads();
    // The next chunk's K lands in the other buffer during A, O and B (B of the chunk before read it).
    if (c + 1 < blk.end) {
      stage_keys(c + 1, kb ^ 1, thread_index());
      mma::commit_copies();
    }
    if (ws.h) {
      copy_out(ws.h + (c * H + head) * static_cast<int64_t>(K) * V, sm.S, K,
               RowPieces<kBV, Kd>(thread_index(), V, 0, V, e0));
    }

    // A: one pass over the key depth for W S and Q' S.
    float ws_[4][4] = {}, o_[4][4] = {};
    {
      const uint32_t w_at = mma::shared_address(sm.W.data), q_at = mma::shared_address(sm.Qe.data),
                     s_at = mma::shared_address(sm.S.data);
      // Blocks of 64 key columns (one address step each), 4 depth steps of 16 unrolled in each.
#pragma unroll 1
      for (int k64 = 0; k64 < Kd; k64 += 64) {
#pragma unroll
        for (int k = 0; k < 64; k += 16) {
          uint32_t aw[4], aq[4];
          if (!p.plain) mma::ldsm_x4(aw, w_at + 2 * k64 + a_rows.at(0, k));
          if constexpr (kOutput) mma::ldsm_x4(aq, q_at + 2 * k64 + a_rows.at(0, k));
#pragma unroll
          for (int j = 0; j < 4; j += 2) {
            uint32_t bs[4];
            mma::ldsm_x4_trans(bs, s_at + 2 * kBV * k64 + b_cols.at(k, 8 * j));
            if (!p.plain) {
              mma::mma(ws_[j], aw, bs[0], bs[1]);
              mma::mma(ws_[j + 1], aw, bs[2], bs[3]);
            }
            if constexpr (kOutput) {
              mma::mma(o_[j], aq, bs[0], bs[1]);
              mma::mma(o_[j + 1], aq, bs[2], bs[3]);
            }
          }
        }
      }
    }
    // Ũ = U − W S (rows m0 + g + 8 r, columns n0 + 8 n + 2 t, + 1).
    const int tid = thread_index(), rows = 16 * ((tid >> 5) & 3), g = (tid & 31) >> 2;  // rows = m0
    const mma::TileLane<kBV> out = mma::c_lane<kBV>(rows, 32 * (tid >> 7), tid & 31);   // A's and O's results
    const float G_last = kDecay ? G[L - 1] : 0.0f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = rows + g + 8 * r;
      const float to_end = kDecay && i < L ? expf(G_last - G[i]) : 1.0f;
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        const uint32_t at = out.at(8 * r, 8 * n);
        const float2 u = mma::unpack(mma::word_at(U, at));
        const float r0 = u.x - ws_[n][2 * r], r1 = u.y - ws_[n][2 * r + 1];
        mma::word_at(sm.Ut_end, at) = mma::pack(r0 * to_end, r1 * to_end);
        if (keep_ut) mma::word_at(sm.U, at) = mma::pack(r0, r1);
      }
    }
    if constexpr (kOutput) {
      mma::product_at<Hold::as_is, Hold::as_is, kC>(o_, sm.R, mma::a_mk_lane<kBV>(rows, tid & 31), sm.V, b_cols);
      // The two warps that read R's rows m0.. (w and w ^ 4) are done with them: O goes there.
      named_barrier(1 + (warp_index() & 3), 64);
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        mma::word_at(sm.R, out.at(0, 8 * n)) = mma::pack(o_[n][0], o_[n][1]);
        mma::word_at(sm.R, out.at(8, 8 * n)) = mma::pack(o_[n][2], o_[n][3]);
      }
    }
    RowFactors<Kd> decay_rows;
    if constexpr (kChannel) row_factors<Kd>(decay_rows, G);
    __syncthreads();
    // Ũ and O as whole rows; each thread reads its pieces before it copies the next chunk's there.
    {
      const RowPieces<kBV> vp = values(tid);
      if (store_ut) copy_out(vp.rows_of(ws.Ut, s.first), U, L, vp);
      if constexpr (kOutput) copy_out(vp.rows_of(o, s.first), sm.R, L, vp);
    }
    compiler_fence();
    if (c + 1 < blk.end) {
      stage(c + 1, tid);
      mma::commit_copies();
    }

    // B: the state update.
    if constexpr (kDecay) {
      const float decay = expf(G_last);
      for_state<Kd>(S, [&](int, int, float& v0, float& v1) { v0 *= decay, v1 *= decay; });
    }
    if constexpr (kChannel) scale_rows<Kd>(S, decay_rows);
    add_transposed_product<Kd>(S, sm.K(kb), state_a_lane<Kd>(tid), sm.Ut_end, state_b_lane<Kd>(tid));
    copy_state<Kd>(S, sm.S, state_lane<Kd>(tid));
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
  using mma::Hold;
  extern __shared__ __align__(128) unsigned char shared[];
  const BackwardShared<Kd> sm(shared);
  __shared__ __align__(16) float G[kDecayValues<Kd, kDecayKind>];
  const Block blk(p.chunks, p.heads, value_tiles(p));
  const int H = p.heads, K = p.key_dim, V = p.value_dim, e0 = blk.e0, head = blk.head;
  // What the phases address from (the thread's pieces of the row copies, its lanes in the tiles) is
  // formed where it is used, from thread_index() (the state and A's results take the registers).
  // Q, K, W rows; dO rows, dŨ.
  const auto keys = [&](int tid) { return RowPieces<Kd>(tid, H * K, head * K, K, 0); };
  const auto values = [&](int tid) { return RowPieces<kBV>(tid, H * V, head * V, V, e0); };

  StateAcc<Kd> dS;
  load_state<Kd>(dS, state_of(dht, blk, p), K, V, e0);
  copy_state<Kd>(dS, sm.dS, state_lane<Kd>(thread_index()));
  const bf16* const q_from = kChannel ? ws.Qg : p.q;
  const bf16* const k_from = kChannel ? ws.Kend : p.k;
  // The tiles of chunk c (a decay per channel: scale Q ⊙ γ for Q, and P) in three parts, each
  // copied as soon as its place is free: Q into buffer qb (the one the current chunk does not read:
  // at the chunk's start), K (once A has read it), then dO, P and the decay values (once B has).
  const auto stage_queries = [&](int64_t c, int qb, int tid) {
    const RowPieces<Kd> kp = keys(tid);
    copy_in(sm.Q(qb), kp.rows_of(q_from, p.chunks.first[c]), chunk_span(p.chunks, c).len, kp);
  };
  const auto stage_keys = [&](int64_t c, int tid) {
    const RowPieces<Kd> kp = keys(tid);
    copy_in(sm.K, kp.rows_of(k_from, p.chunks.first[c]), chunk_span(p.chunks, c).len, kp);
  };
  const auto stage_rest = [&](int64_t c, int tid) {
    const Span s = chunk_span(p.chunks, c);
    const RowPieces<kBV> vp = values(tid);
    copy_in(sm.dO, vp.rows_of(d_o, s.first), s.len, vp);
    if constexpr (kChannel) copy_in(sm.Pt, ws.P + (c * H + head) * kC * kC, kC, RowPieces<kBV>(tid, kC, 0, kC, 0));
    stage_decay<Kd, kDecayKind>(G, p, ws, s, c, head);
  };
  if (blk.begin < blk.end) {
    stage_queries(blk.end - 1, 0, thread_index());
    stage_keys(blk.end - 1, thread_index());
    stage_rest(blk.end - 1, thread_index());
    mma::commit_copies();
  }

  // Copy groups a chunk commits, in order (some empty): W (for C), the next chunk's Q, its K, the
  // rest; C waits for the first only.
  for (int64_t c = blk.end - 1; c >= blk.begin; --c) {
    const int qb = static_cast<int>((blk.end - 1 - c) & 1);
    const Span s = chunk_span(p.chunks, c);
    const int L = s.len;
    mma::wait_copies<0>();
    __syncthreads();
    int tid = thread_index();
    if (!p.plain) {
      const RowPieces<Kd> kp = keys(tid);
      copy_in(sm.W, kp.rows_of(ws.W, s.first), L, kp);  // for C, landing during A and B
    }
    mma::commit_copies();
    if (c > blk.begin) stage_queries(c - 1, qb ^ 1, tid);  // C of the chunk before read that buffer
    mma::commit_copies();
    if (ws.dh) {
      copy_out(ws.dh + (c * H + head) * static_cast<int64_t>(K) * V, sm.dS, K, RowPieces<kBV, Kd>(tid, V, 0, V, e0));
    }
    const RowPieces<kBV> vp = values(tid);
    // scale γ ⊙ dO (a decay per channel: dO, scale γ is on Q), the thread's pieces of 8 entries.
#pragma unroll
    for (int j = 0; j < RowPieces<kBV>::kCount; ++j) {
      const int i = vp.row + j * RowPieces<kBV>::kRowStep;
      const float f = kChannel ? 1.0f : kDecay && i < L ? p.scale * expf(G[i]) : p.scale;
      const uint32_t at = vp.offset + j * RowPieces<kBV>::kStepBytes;
      uint4 v = mma::piece_at(sm.dO, at);
      uint32_t* w = reinterpret_cast<uint32_t*>(&v);
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float2 x = mma::unpack(w[r]);
        w[r] = mma::pack(f * x.x, f * x.y);
      }
      mma::piece_at(sm.dO_g, at) = v;
    }

    // A: K Qᵀ and K dS in one pass over the key depth (rows j of the chunk; K dS alone with P
    // from intra).
    float kq[4][4] = {}, du[4][4] = {};
    {
      const int at_tid = thread_index(), at_lane = at_tid & 31;
      const int m0 = 16 * ((at_tid >> 5) & 3), n0 = 32 * (at_tid >> 7);    // the warp's rows and columns
      const mma::TileLane<Kd> a_rows = mma::a_mk_lane<Kd>(m0, at_lane);    // K
      const mma::TileLane<kBV> b_cols = mma::b_kn_lane<kBV>(n0, at_lane);  // dS
      const mma::TileLane<Kd> q_cols = mma::b_nk_lane<Kd>(n0, at_lane);    // Q
      const uint32_t k_at = mma::shared_address(sm.K.data), s_at = mma::shared_address(sm.dS.data),
                     q_at = mma::shared_address(sm.Q(qb).data);
      // Blocks of 64 key columns (one address step each), 4 depth steps of 16 unrolled in each.
#pragma unroll 1
      for (int k64 = 0; k64 < Kd; k64 += 64) {
#pragma unroll
        for (int k = 0; k < 64; k += 16) {
          uint32_t ak[4];
          mma::ldsm_x4(ak, k_at + 2 * k64 + a_rows.at(0, k));
#pragma unroll
          for (int j = 0; j < 4; j += 2) {
            uint32_t bd[4];
            mma::ldsm_x4_trans(bd, s_at + 2 * kBV * k64 + b_cols.at(k, 8 * j));
            mma::mma(du[j], ak, bd[0], bd[1]);
            mma::mma(du[j + 1], ak, bd[2], bd[3]);
            if constexpr (!kChannel) {
              uint32_t bq[4];
              mma::ldsm_x4(bq, q_at + 2 * k64 + q_cols.at(8 * j, k));
              mma::mma(kq[j], ak, bq[0], bq[1]);
              mma::mma(kq[j + 1], ak, bq[2], bq[3]);
            }
          }
        }
      }
    }
    const float G_last = kDecay ? G[L - 1] : 0.0f;
    tid = thread_index();
    // rows m0, columns n0, the lane's g and t
    const int rows = 16 * ((tid >> 5) & 3), cols = 32 * (tid >> 7), g = (tid & 31) >> 2, t = tid & 3;
    const mma::TileLane<kBV> out = mma::c_lane<kBV>(rows, cols, tid & 31);  // A's and B's results
    if constexpr (!kChannel) {
      // (scale e ⊙ Pᵀ)_ji for i ≥ j (rows j = m0 + g + 8 r, columns i = n0 + 8 n + 2 t, + 1).
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int j = rows + g + 8 * r;
        const auto decayed = [&](int i, float x) {
          if (i < j || i >= L) return 0.0f;
          return kDecay ? p.scale * x * expf(G[i] - G[j]) : p.scale * x;
        };
#pragma unroll
        for (int n = 0; n < 4; ++n) {
          const int i = cols + 8 * n + 2 * t;
          mma::word_at(sm.Pt, out.at(8 * r, 8 * n)) =
              mma::pack(decayed(i, kq[n][2 * r]), decayed(i + 1, kq[n][2 * r + 1]));
        }
        if constexpr (kDecay) {
          const float to_end = j < L ? expf(G_last - G[j]) : 0.0f;
#pragma unroll
          for (int n = 0; n < 4; ++n) du[n][2 * r] *= to_end, du[n][2 * r + 1] *= to_end;
        }
      }
    }
    __syncthreads();
    if (c > blk.begin) stage_keys(c - 1, thread_index());  // A is done with K
    mma::commit_copies();

    // B: dŨ (the tile holds Pᵀ, or P from intra); −dŨ for C, dŨ stored from it.
    if constexpr (kChannel) {
      mma::product_at<Hold::transposed, Hold::as_is, kC>(du, sm.Pt, mma::a_km_lane<kBV>(rows, tid & 31), sm.dO,
                                                         mma::b_kn_lane<kBV>(cols, tid & 31));
    } else {
      mma::product_at<Hold::as_is, Hold::as_is, kC>(du, sm.Pt, mma::a_mk_lane<kBV>(rows, tid & 31), sm.dO,
                                                    mma::b_kn_lane<kBV>(cols, tid & 31));
    }
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      mma::word_at(sm.dUt_neg, out.at(0, 8 * n)) = mma::pack(-du[n][0], -du[n][1]);
      mma::word_at(sm.dUt_neg, out.at(8, 8 * n)) = mma::pack(-du[n][2], -du[n][3]);
    }
    mma::wait_copies<2>();  // W (the next chunk's Q and K may still be in flight)
    __syncthreads();
    RowFactors<Kd> decay_rows;
    if constexpr (kChannel) {
      row_factors<Kd>(decay_rows, G);
      __syncthreads();  // before the next chunk's G lands
    }
    // dŨ = −(−dŨ) as whole rows (bf16 rounding is odd: the same bits as rounding dŨ).
    tid = thread_index();
    if (ws.dUt) {
      const RowPieces<kBV> dp = values(tid);
      copy_out<true>(dp.rows_of(ws.dUt, s.first), sm.dUt_neg, L, dp);
    }
    if (c > blk.begin) {
      stage_rest(c - 1, tid);  // B is done with dO and P, and the decay values are read
      mma::commit_copies();
    }

    // C: the state gradient.
    if constexpr (kDecay) {
      const float decay = expf(G_last);
      for_state<Kd>(dS, [&](int, int, float& v0, float& v1) { v0 *= decay, v1 *= decay; });
    }
    if constexpr (kChannel) scale_rows<Kd>(dS, decay_rows);
    const mma::TileLane<Kd> k_rows = state_a_lane<Kd>(tid);
    const mma::TileLane<kBV> u_cols = state_b_lane<Kd>(tid);
    add_transposed_product<Kd>(dS, sm.Q(qb), k_rows, sm.dO_g, u_cols);
    if (!p.plain) add_transposed_product<Kd>(dS, sm.W, k_rows, sm.dUt_neg, u_cols);
    copy_state<Kd>(dS, sm.dS, state_lane<Kd>(tid));
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
