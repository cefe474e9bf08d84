// Short causal depthwise convolution + SiLU, never reading across sequences (the math of
// kernels/cpu/short_conv.h). x, out: [N, C]; weight: [C, W]; bias: [C] or none (0); b(t), e(t): the
// first token and one past the last token of t's sequence; x[s, c] = 0 for s < b(t):
//   pre[t, c] = Σ_{d<W} weight[c, W−1−d] · x[t − d, c] + bias[c],   out = silu(pre)
// Backward, with dpre[t, c] = dout[t, c] · silu'(pre[t, c]) (pre recomputed, never stored):
//   dx[s, c] = Σ_{i<W, s+(W−1)−i < e(s)} weight[c, i] · dpre[s + (W−1) − i, c]      (overwritten)
//   dweight[c, W−1−d] += Σ_{t, t−d ≥ b(t)} dpre[t, c] · x[t − d, c]                  (accumulated)
//   dbias[c] += Σ_t dpre[t, c]                                                       (accumulated)
//
// Tiles in shared memory, one pass over the tokens for each direction. A block owns kLanes · Q
// neighbouring channels (Q = 4 bytes of T per lane when K = 4, else 1) and a tile of kTileTokens
// tokens; its threads first copy the tile's rows of x (with the K−1 rows before it, and backward
// the K−1 after it) and, backward, of dout (with the K−1 rows after it) into shared memory in
// V-element accesses (16-byte asynchronous copies when C is a multiple of 16 / sizeof(T) and the
// tensors are 16-byte aligned, else one element), rows outside [0, N) and channels ≥ C as 0. Then a
// thread owns Q channels (threadIdx.x) and a run of kRun tokens (threadIdx.y) and walks it through
// shared memory, keeping the last K ≥ W rows of x (and, backward, the K dx rows still being summed)
// in registers: the forward's f32 arithmetic is the same in the same order as a plain loop over d.
// dpre lives only in registers (a run recomputes the K−1 dpre rows after it, which the next run
// owns). Backward, a block walks kSpanTiles tiles, then adds its runs' dweight and dbias sums in a
// fixed order into one row of partials per span, which add_partials adds in a fixed order: the
// parameter gradients are the same bit for bit on every run. W ≤ kShortConvMaxWidth (checked by
// ops::); K = 4 for W ≤ 4, else kShortConvMaxWidth.
#include <cuda_pipeline.h>

#include <initializer_list>
#include <type_traits>
#include <vector>

#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/token_bounds.h"

namespace linea::cuda {

namespace {
constexpr int kLanes = 64;  // channel lanes per block (threadIdx.x)
constexpr int kRuns = 4;    // runs per tile (threadIdx.y)
constexpr int kRun = 16;    // tokens per run
constexpr int kThreads = kLanes * kRuns;
constexpr int kTileTokens = kRun * kRuns;
constexpr int kSpanTiles = 2;  // backward: tiles per block, one row of partials each span
constexpr int kSpanTokens = kTileTokens * kSpanTiles;
// Resident blocks per multiprocessor the kernels are compiled for (at K = 4: ≤ 40 and ≤ 64
// registers a thread); the wide kernels hold 4× the rows in registers.
template <int K>
inline constexpr int kForwardBlocks = K <= 4 ? 6 : 3;
template <int K>
inline constexpr int kBackwardBlocks = K <= 4 ? 4 : 2;

struct ConvShape {
  int64_t tokens, channels;
  int width;
};

// Channels per lane: one 4-byte shared-memory access per row at K = 4; one channel at the wide
// kernels, whose windows of K rows would otherwise not fit in registers.
template <class T, int K>
inline constexpr int kLaneChannels = K <= 4 ? static_cast<int>(4 / sizeof(T)) : 1;

template <class T, int K>
inline constexpr int kTileChannels = kLaneChannels<T, K>* kLanes;

// Q channels of one token row, as float.
template <int Q>
struct Row {
  float v[Q];
};

// The last K rows of a walk: at[d] is the row d steps back (at[0] the newest).
template <int Q, int K>
struct Window {
  Row<Q> at[K] = {};
  __device__ __forceinline__ void push(const Row<Q>& r) {
#pragma unroll
    for (int d = K - 1; d > 0; --d) at[d] = at[d - 1];
    at[0] = r;
  }
};

// tile[r][·] = src[first + r, c0 + ·] for r < Rows, 0 outside the tokens [0, N) and channels ≥ C
// (V > 1 only when C is a multiple of V). 16-byte accesses go as asynchronous copies (no registers
// held, every copy in flight at once); the caller commits them as one group and waits for it
// (__pipeline_commit, then __pipeline_wait_prior(0): cp.async.wait_group waits only for committed
// groups, so without the commit the copies could still be landing after the barrier).
template <int V, int Rows, int Channels, class T>
__device__ __forceinline__ void stage(T (*tile)[Channels], const T* __restrict__ src, int64_t first, int64_t c0,
                                      ConvShape s) {
  constexpr int kPerRow = Channels / V, kRowsPerStep = kThreads / kPerRow;
  constexpr bool kAsync = V * sizeof(T) == 16;
  static_assert(Channels % V == 0 && kThreads % kPerRow == 0 && (kAsync || V == 1));
  const int thread = threadIdx.y * kLanes + threadIdx.x, j = thread % kPerRow * V;
  const bool channel_inside = c0 + j < s.channels;
#pragma unroll(kAsync ? (Rows + kRowsPerStep - 1) / kRowsPerStep : 4)
  for (int r = thread / kPerRow; r < Rows; r += kRowsPerStep) {
    const int64_t t = first + r;
    const bool inside = channel_inside && t >= 0 && t < s.tokens;
    const T* from = inside ? src + t * s.channels + c0 + j : src;
    if constexpr (kAsync) {
      __pipeline_memcpy_async(&tile[r][j], from, 16, inside ? 0 : 16);
    } else {
      tile[r][j] = inside ? *from : from_float<T>(0.0f);
    }
  }
}

// bounds[r] = src[first + r] for the tokens r < Rows inside [0, N).
template <int Rows>
__device__ __forceinline__ void stage_bounds(int64_t* bounds, const int64_t* __restrict__ src, int64_t first,
                                             ConvShape s) {
  for (int i = threadIdx.y * kLanes + threadIdx.x; i < Rows; i += kThreads) {
    if (first + i < s.tokens) bounds[i] = src[first + i];
  }
}

// The thread's Q channels and taps: by_lag[d] = weight[c, W−1−d], 0 beyond W and C.
template <class T, int K>
struct Lane {
  static constexpr int Q = kLaneChannels<T, K>;
  int64_t c;
  bool active;
  Row<Q> by_lag[K];
  Row<Q> bias;

  __device__ Lane(const T* weight, const T* bias_data, int64_t c0, ConvShape s) {
    c = c0 + int64_t{threadIdx.x} * Q;
    active = c < s.channels;
#pragma unroll
    for (int d = 0; d < K; ++d) {
#pragma unroll
      for (int k = 0; k < Q; ++k) {
        const bool tap = c + k < s.channels && d < s.width;
        by_lag[d].v[k] = tap ? to_float(weight[(c + k) * s.width + (s.width - 1 - d)]) : 0.0f;
      }
    }
#pragma unroll
    for (int k = 0; k < Q; ++k) bias.v[k] = c + k < s.channels && bias_data ? to_float(bias_data[c + k]) : 0.0f;
  }

  // The lane's channels of a shared tile row.
  __device__ __forceinline__ Row<Q> load(const T* row) const {
    const Pack<T, Q> pack = load_pack<Q>(row + threadIdx.x * Q);
    Row<Q> r;
#pragma unroll
    for (int k = 0; k < Q; ++k) r.v[k] = to_float(pack.v[k]);
    return r;
  }

  // out[t, c…] = r: one Q-element store when the tensors take V-element accesses, else the
  // channels < C one by one.
  template <int V>
  __device__ __forceinline__ void store(T* out, int64_t t, const Row<Q>& r, ConvShape s) const {
    T* p = out + t * s.channels + c;
    if constexpr (V > 1) {
      Pack<T, Q> pack;
#pragma unroll
      for (int k = 0; k < Q; ++k) pack.v[k] = from_float<T>(r.v[k]);
      store_pack<Q>(p, pack);
    } else {
#pragma unroll
      for (int k = 0; k < Q; ++k) {
        if (c + k < s.channels) p[k] = from_float<T>(r.v[k]);
      }
    }
  }

  // pre at a token whose window of x is `x` (x.at[0] = its row) and which sees `lags` = min(W,
  // t − b(t) + 1) rows.
  __device__ __forceinline__ Row<Q> pre(const Window<Q, K>& x, int64_t lags) const {
    Row<Q> p = bias;
#pragma unroll
    for (int d = 0; d < K; ++d) {
      if (d >= lags) break;
#pragma unroll
      for (int k = 0; k < Q; ++k) p.v[k] += by_lag[d].v[k] * x.at[d].v[k];
    }
    return p;
  }
};

// The window of x before a run whose first row is tile row `first_row`: rows first_row − (K−1) …
// first_row − 1 (the staged zeros before token 0).
template <class T, int K, int Channels>
__device__ __forceinline__ Window<kLaneChannels<T, K>, K> history(const Lane<T, K>& lane, const T (*x)[Channels],
                                                                  int first_row) {
  Window<kLaneChannels<T, K>, K> w;
#pragma unroll
  for (int d = K - 1; d >= 1; --d) w.push(lane.load(x[first_row - d]));
  return w;
}

// Rows of x that token t sees: min(W, t − b(t) + 1).
__device__ __forceinline__ int64_t lags_at(int64_t t, int64_t begin, int width) {
  return min(int64_t{width}, t - begin + 1);
}

template <class T, int V, int K>
__global__ void __launch_bounds__(kThreads, kForwardBlocks<K>)
    forward_kernel(T* __restrict__ out, const T* __restrict__ x, const T* weight, const T* bias,
                   const int64_t* __restrict__ begin, ConvShape s) {
  constexpr int kHalo = K - 1, kChannels = kTileChannels<T, K>;
  __shared__ __align__(16) T xs[kTileTokens + kHalo][kChannels];  // row r: token t0 − (K−1) + r
  __shared__ int64_t starts[kTileTokens];                         // b(t0 + r)
  const int64_t t0 = int64_t{blockIdx.x} * kTileTokens, c0 = int64_t{blockIdx.y} * kChannels;
  stage<V, kTileTokens + kHalo>(xs, x, t0 - kHalo, c0, s);
  stage_bounds<kTileTokens>(starts, begin, t0, s);
  const Lane<T, K> lane(weight, bias, c0, s);
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
  const int first = threadIdx.y * kRun;  // the run's first token, relative to t0
  if (!lane.active) return;
  auto window = history(lane, xs, first + kHalo);
#pragma unroll 4
  for (int j = first; j < first + kRun && t0 + j < s.tokens; ++j) {
    window.push(lane.load(xs[j + kHalo]));
    auto r = lane.pre(window, lags_at(t0 + j, starts[j], s.width));
#pragma unroll
    for (float& v : r.v) v = silu(v);
    lane.template store<V>(out, t0 + j, r, s);
  }
}

// The shared memory of backward_kernel: the staged tile, then (after the walks) the runs' sums.
template <class T, int K>
union BackwardShared {
  static constexpr int kHalo = K - 1, kChannels = kTileChannels<T, K>, kCells = (K + 1) * kLaneChannels<T, K>;
  struct {
    alignas(16) T x[kTileTokens + 2 * kHalo][kChannels];  // row r: token t0 − (K−1) + r
    alignas(16) T dout[kTileTokens + kHalo][kChannels];   // row r: token t0 + r
    int64_t begin[kTileTokens + kHalo];                   // b(t0 + r)
  } tile;
  float sums[kRuns][kLanes][kCells];  // per thread: dweight by lag, then dbias
};

// The backward as a scatter over u: with d < lags(u) (u − d in u's sequence, d < W),
//   dx[u − d] += weight[c, W−1−d] · dpre[u],   dweight[c, W−1−d] += dpre[u] · x[u − d]
// (the header's gather for dx, dx[t] summed over dpre[t], dpre[t + 1], … in that order).
// A run walks u over its tokens and the K−1 after them, holding the dx rows u … u − (K−1) still
// being summed; row u − (K−1) is complete after step u.
// partials: [spans][C·W] of dweight sums (column c·W + i), then [spans][C] of dbias sums.
template <class T, int V, int K>
__global__ void __launch_bounds__(kThreads, kBackwardBlocks<K>)
    backward_kernel(T* __restrict__ dx, float* __restrict__ partials, const T* __restrict__ dout,
                    const T* __restrict__ x, const T* weight, const T* bias, const int64_t* __restrict__ begin,
                    ConvShape s) {
  using Shared = BackwardShared<T, K>;
  constexpr int kHalo = Shared::kHalo, kChannels = Shared::kChannels, Q = kLaneChannels<T, K>;
  __shared__ Shared shared;
  auto& tile = shared.tile;
  const int64_t c0 = int64_t{blockIdx.y} * kChannels;
  const Lane<T, K> lane(weight, bias, c0, s);
  const int first = threadIdx.y * kRun;  // the run's first token, relative to the tile
  Row<Q> dweight[K] = {}, dbias = {};
  for (int64_t t0 = int64_t{blockIdx.x} * kSpanTokens; t0 < min(s.tokens, (blockIdx.x + 1) * int64_t{kSpanTokens});
       t0 += kTileTokens) {
    __syncthreads();  // the previous tile's walks are done
    stage<V, kTileTokens + 2 * kHalo>(tile.x, x, t0 - kHalo, c0, s);
    stage<V, kTileTokens + kHalo>(tile.dout, dout, t0, c0, s);
    stage_bounds<kTileTokens + kHalo>(tile.begin, begin, t0, s);
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
    if (!lane.active) continue;
    auto xs = history(lane, tile.x, first + kHalo);
    Window<Q, K> pending;                  // pending.at[d]: dx row u − d
    const int64_t tokens = s.tokens - t0;  // of the tile and after it
#pragma unroll
    for (int u = first; u < first + kRun + kHalo; ++u) {
      pending.push(Row<Q>{});
      if (u < tokens) {
        xs.push(lane.load(tile.x[u + kHalo]));
        const int64_t lags = lags_at(t0 + u, tile.begin[u], s.width);
        const Row<Q> p = lane.pre(xs, lags), g = lane.load(tile.dout[u]);
        Row<Q> dpre;
#pragma unroll
        for (int k = 0; k < Q; ++k) dpre.v[k] = g.v[k] * silu_grad(p.v[k]);
        const bool own = u < first + kRun;
#pragma unroll
        for (int d = 0; d < K; ++d) {
          if (d >= lags) break;
#pragma unroll
          for (int k = 0; k < Q; ++k) {
            pending.at[d].v[k] += lane.by_lag[d].v[k] * dpre.v[k];
            if (own) dweight[d].v[k] += dpre.v[k] * xs.at[d].v[k];
          }
        }
        if (own) {
#pragma unroll
          for (int k = 0; k < Q; ++k) dbias.v[k] += dpre.v[k];
        }
      }
      const int t = u - kHalo;
      if (t >= first && t < tokens) lane.template store<V>(dx, t0 + t, pending.at[kHalo], s);
    }
  }
  __syncthreads();  // the tile is done with: its memory takes the sums
#pragma unroll
  for (int d = 0; d < K; ++d) {
#pragma unroll
    for (int k = 0; k < Q; ++k) shared.sums[threadIdx.y][threadIdx.x][d * Q + k] = dweight[d].v[k];
  }
#pragma unroll
  for (int k = 0; k < Q; ++k) shared.sums[threadIdx.y][threadIdx.x][K * Q + k] = dbias.v[k];
  __syncthreads();
  // Cell (lane l, lag d, channel k) of the block, summed over the runs in order.
  const int64_t weight_cells = s.channels * s.width;
  float* weight_row = partials + int64_t{blockIdx.x} * weight_cells;
  float* bias_row = partials + int64_t{gridDim.x} * weight_cells + int64_t{blockIdx.x} * s.channels;
  constexpr int kCells = Shared::kCells;
  for (int cell = threadIdx.y * kLanes + threadIdx.x; cell < kLanes * kCells; cell += kThreads) {
    const int l = cell / kCells, slot = cell % kCells, d = slot / Q, k = slot % Q;
    const int64_t c = c0 + l * Q + k;
    if (c >= s.channels || (d < K && d >= s.width)) continue;
    float sum = 0.0f;
    for (int r = 0; r < kRuns; ++r) sum += shared.sums[r][l][slot];
    if (d < K) {
      weight_row[c * s.width + (s.width - 1 - d)] = sum;
    } else {
      bias_row[c] = sum;
    }
  }
}

// Calls fn(T, V, K) for x's dtype, the widest V the shape and pointers allow and the smallest K ≥ W.
template <class Fn>
void dispatch_conv(const Tensor& x, ConvShape s, std::initializer_list<const void*> pointers, Fn&& fn) {
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    dispatch_pack_width<T>(s.channels % kPackWidth<T> == 0 && aligned16(pointers), [&](auto v) {
      if (s.width > 4) return fn(zero, v, std::integral_constant<int, kShortConvMaxWidth>{});
      fn(zero, v, std::integral_constant<int, 4>{});
    });
  });
}

template <class T, int K>
dim3 conv_grid(ConvShape s, int64_t tokens_per_block) {
  return dim3(static_cast<unsigned>(ceil_div(s.tokens, tokens_per_block)),
              static_cast<unsigned>(ceil_div(s.channels, kTileChannels<T, K>)));
}

}  // namespace

void short_conv_silu_forward(Tensor out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                             const SeqLayout& seqs) {
  const ConvShape s{x.dim(0), x.dim(1), static_cast<int>(weight.dim(1))};
  if (s.tokens == 0 || s.channels == 0) return;
  const std::vector<void*> pieces = scratch_with_token_bounds(seqs, {});
  dispatch_conv(x, s, {out.raw(), x.raw()}, [&](auto zero, auto v, auto k) {
    using T = decltype(zero);
    constexpr int K = decltype(k)::value;
    const T* b = bias.defined() ? data_of<T>(bias) : nullptr;
    forward_kernel<T, decltype(v)::value, K><<<conv_grid<T, K>(s, kTileTokens), dim3(kLanes, kRuns)>>>(
        data_of<T>(out), data_of<T>(x), data_of<T>(weight), b, static_cast<const int64_t*>(pieces[1]), s);
    check_launch("short_conv forward_kernel");
  });
}

void short_conv_silu_backward(Tensor dx, Tensor dweight, Tensor dbias, const Tensor& dout, const Tensor& x,
                              const Tensor& weight, const Tensor& bias, const SeqLayout& seqs) {
  const ConvShape s{x.dim(0), x.dim(1), static_cast<int>(weight.dim(1))};
  if (s.tokens == 0 || s.channels == 0) return;
  const int64_t spans = ceil_div(s.tokens, kSpanTokens);
  const std::vector<void*> pieces =
      scratch_with_token_bounds(seqs, {static_cast<size_t>(spans * s.channels * (s.width + 1)) * sizeof(float)});
  float* partials = static_cast<float*>(pieces[3]);
  dispatch_conv(x, s, {dx.raw(), dout.raw(), x.raw()}, [&](auto zero, auto v, auto k) {
    using T = decltype(zero);
    constexpr int K = decltype(k)::value;
    const T* b = bias.defined() ? data_of<T>(bias) : nullptr;
    backward_kernel<T, decltype(v)::value, K><<<conv_grid<T, K>(s, kSpanTokens), dim3(kLanes, kRuns)>>>(
        data_of<T>(dx), partials, data_of<T>(dout), data_of<T>(x), data_of<T>(weight), b,
        static_cast<const int64_t*>(pieces[1]), s);
    check_launch("short_conv backward_kernel");
    const int64_t cells = s.channels * s.width;
    add_partials(data_of<T>(dweight), partials, spans, cells);
    if (dbias.defined()) add_partials(data_of<T>(dbias), partials + spans * cells, spans, s.channels);
  });
}

}  // namespace linea::cuda
