// Short causal depthwise convolution + SiLU, never reading across sequences (the math of
// kernels/cpu/short_conv.h). x, out: [N, C]; weight: [C, W]; bias: [C] or none (0); b(t), e(t): the
// first token and one past the last token of t's sequence; x[s, c] = 0 for s < b(t):
//   pre[t, c] = Σ_{d<W} weight[c, W−1−d] · x[t − d, c] + bias[c],   out = silu(pre)
// Backward, with dpre[t, c] = dout[t, c] · silu'(pre[t, c]) (pre recomputed, never stored):
//   dx[s, c] = Σ_{i<W, s+(W−1)−i < e(s)} weight[c, i] · dpre[s + (W−1) − i, c]      (overwritten)
//   dweight[c, W−1−d] += Σ_{t, t−d ≥ b(t)} dpre[t, c] · x[t − d, c]                  (accumulated)
//   dbias[c] += Σ_t dpre[t, c]                                                       (accumulated)
//
// One pass over the tokens for each direction. A thread owns V neighbouring channels and a run of
// kRun tokens, and walks the run keeping the last K ≥ W rows of x (and, backward, of dpre) in
// registers: every x, dout row is read once (plus W−1 rows of overlap at the run's ends) and dpre
// lives only in registers. A block is 32 channel groups × 8 runs (a warp reads 32·V neighbouring
// channels of one token); backward, the block adds its 8 runs' dweight and dbias sums in a fixed
// order into one row of partials per token block, which add_partials then adds in a fixed
// order: the parameter gradients are the same bit for bit on every run. V = 4 when C is a multiple
// of 4 and the tensors are 16-byte aligned, else 1; W ≤ kShortConvMaxWidth (checked by ops::).
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/token_bounds.h"

namespace linea::cuda {

namespace {
constexpr int kRun = 32;     // tokens per thread
constexpr int kGroups = 32;  // channel groups per block (threadIdx.x)
constexpr int kRuns = 8;     // runs per block (threadIdx.y)
constexpr int kBlockTokens = kRun * kRuns;

struct ConvShape {
  int64_t tokens, channels;
  int width;
};

// V channels of one token row, as float.
template <int V>
struct Row {
  float v[V];
};

template <int V, class T>
__device__ __forceinline__ Row<V> load_row(const T* p) {
  Row<V> r;
  if constexpr (V == 1) {
    r.v[0] = to_float(*p);
  } else {
    const Pack<T, V> pack = load_pack<V>(p);
#pragma unroll
    for (int k = 0; k < V; ++k) r.v[k] = to_float(pack.v[k]);
  }
  return r;
}

template <int V, class T>
__device__ __forceinline__ void store_row(T* p, const Row<V>& r) {
  if constexpr (V == 1) {
    *p = from_float<T>(r.v[0]);
  } else {
    Pack<T, V> pack;
#pragma unroll
    for (int k = 0; k < V; ++k) pack.v[k] = from_float<T>(r.v[k]);
    store_pack<V>(p, pack);
  }
}

// The last K rows of a walk: at[d] is the row d steps back (at[0] the newest).
template <int V, int K>
struct Window {
  Row<V> at[K] = {};
  __device__ __forceinline__ void push(const Row<V>& r) {
#pragma unroll
    for (int d = K - 1; d > 0; --d) at[d] = at[d - 1];
    at[0] = r;
  }
};

// The thread's channels, taps and first token; by_lag[d] = weight[c, W−1−d] (pre's tap at lag d)
// and by_index[i] = weight[c, i] (dx's), both 0 beyond W, so that every index below is static.
template <int V, int K>
struct Lane {
  int64_t c, first;
  bool active;
  Row<V> by_lag[K], by_index[K];
  Row<V> bias;

  template <class T>
  __device__ Lane(const T* weight, const T* bias_data, ConvShape s) {
    c = (int64_t{blockIdx.y} * kGroups + threadIdx.x) * V;
    first = int64_t{blockIdx.x} * kBlockTokens + int64_t{threadIdx.y} * kRun;
    active = c < s.channels;
#pragma unroll
    for (int d = 0; d < K; ++d) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const bool tap = active && d < s.width;
        by_lag[d].v[k] = tap ? to_float(weight[(c + k) * s.width + (s.width - 1 - d)]) : 0.0f;
        by_index[d].v[k] = tap ? to_float(weight[(c + k) * s.width + d]) : 0.0f;
      }
    }
#pragma unroll
    for (int k = 0; k < V; ++k) bias.v[k] = active && bias_data ? to_float(bias_data[c + k]) : 0.0f;
  }

  // x's rows first−1 … first−(W−1) (0 before token 0), so that the walk starts with a full window.
  template <class T>
  __device__ Window<V, K> history(const T* x, ConvShape s) const {
    Window<V, K> w;
#pragma unroll
    for (int d = K - 1; d >= 1; --d) {
      const int64_t t = first - d;
      w.push(d < s.width && t >= 0 ? load_row<V>(x + t * s.channels + c) : Row<V>{});
    }
    return w;
  }

  // pre at token t, whose window of x is `x` (x.at[0] = row t) and whose sequence starts at begin.
  __device__ __forceinline__ Row<V> pre(const Window<V, K>& x, int64_t t, int64_t begin) const {
    Row<V> p = bias;
#pragma unroll
    for (int d = 0; d < K; ++d) {
      if (t - d < begin) break;
#pragma unroll
      for (int k = 0; k < V; ++k) p.v[k] += by_lag[d].v[k] * x.at[d].v[k];
    }
    return p;
  }
};

template <class T, int V, int K>
__global__ void __launch_bounds__(kGroups* kRuns)
    forward_kernel(T* __restrict__ out, const T* __restrict__ x, const T* weight, const T* bias,
                   const int64_t* __restrict__ begin, ConvShape s) {
  const Lane<V, K> lane(weight, bias, s);
  if (!lane.active || lane.first >= s.tokens) return;
  Window<V, K> window = lane.history(x, s);
  const int64_t last = min(s.tokens, lane.first + kRun);
#pragma unroll 4
  for (int64_t t = lane.first; t < last; ++t) {
    window.push(load_row<V>(x + t * s.channels + lane.c));
    Row<V> r = lane.pre(window, t, begin[t]);
#pragma unroll
    for (int k = 0; k < V; ++k) r.v[k] = silu(r.v[k]);
    store_row<V>(out + t * s.channels + lane.c, r);
  }
}

// partials: [token blocks][C·W] of dweight sums (column c·W + i), then [token blocks][C] of dbias sums.
template <class T, int V, int K>
__global__ void __launch_bounds__(kGroups* kRuns)
    backward_kernel(T* __restrict__ dx, float* __restrict__ partials, const T* __restrict__ dout,
                    const T* __restrict__ x, const T* weight, const T* bias, const int64_t* __restrict__ begin,
                    const int64_t* __restrict__ end, ConvShape s) {
  constexpr int kCells = (K + 1) * V;  // per thread: dweight by lag, then dbias
  __shared__ float sums[kRuns][kGroups][kCells];
  const Lane<V, K> lane(weight, bias, s);
  Row<V> dweight[K] = {}, dbias = {};
  if (lane.active && lane.first < s.tokens) {
    Window<V, K> xs = lane.history(x, s), dpres;
    const int64_t own_end = min(s.tokens, lane.first + kRun);
    // Steps u ≥ own_end only finish the dx of the run's last W−1 tokens (dpre[u] = 0 past N).
    const int64_t walk_end = lane.first + kRun + s.width - 1;
#pragma unroll 4
    for (int64_t u = lane.first; u < walk_end; ++u) {
      Row<V> dpre{};
      if (u < s.tokens) {
        xs.push(load_row<V>(x + u * s.channels + lane.c));
        const int64_t b = begin[u];
        const Row<V> p = lane.pre(xs, u, b), g = load_row<V>(dout + u * s.channels + lane.c);
#pragma unroll
        for (int k = 0; k < V; ++k) dpre.v[k] = g.v[k] * silu_grad(p.v[k]);
        if (u < own_end) {
#pragma unroll
          for (int d = 0; d < K; ++d) {
            if (u - d < b) break;
#pragma unroll
            for (int k = 0; k < V; ++k) dweight[d].v[k] += dpre.v[k] * xs.at[d].v[k];
          }
#pragma unroll
          for (int k = 0; k < V; ++k) dbias.v[k] += dpre.v[k];
        }
      }
      dpres.push(dpre);
      const int64_t t = u - (s.width - 1);  // dpres.at[i] = dpre[t + (W−1) − i]
      if (t < lane.first || t >= own_end) continue;
      const int64_t e = end[t];
      Row<V> g{};
#pragma unroll
      for (int i = 0; i < K; ++i) {
        if (u - i < e) {
#pragma unroll
          for (int k = 0; k < V; ++k) g.v[k] += lane.by_index[i].v[k] * dpres.at[i].v[k];
        }
      }
      store_row<V>(dx + t * s.channels + lane.c, g);
    }
  }
#pragma unroll
  for (int d = 0; d < K; ++d) {
#pragma unroll
    for (int k = 0; k < V; ++k) sums[threadIdx.y][threadIdx.x][d * V + k] = dweight[d].v[k];
  }
#pragma unroll
  for (int k = 0; k < V; ++k) sums[threadIdx.y][threadIdx.x][K * V + k] = dbias.v[k];
  __syncthreads();
  // Cell (group g, lag d, channel k) of the block, summed over the runs in order.
  const int64_t base = int64_t{blockIdx.y} * kGroups * V, weight_cells = s.channels * s.width;
  float* weight_row = partials + int64_t{blockIdx.x} * weight_cells;
  float* bias_row = partials + int64_t{gridDim.x} * weight_cells + int64_t{blockIdx.x} * s.channels;
  for (int cell = threadIdx.y * kGroups + threadIdx.x; cell < kGroups * kCells; cell += kGroups * kRuns) {
    const int g = cell / kCells, slot = cell % kCells, d = slot / V, k = slot % V;
    const int64_t c = base + g * V + k;
    if (c >= s.channels || (d < K && d >= s.width)) continue;
    float sum = 0.0f;
    for (int r = 0; r < kRuns; ++r) sum += sums[r][g][slot];
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
    if (s.width > 4)
      return fn(zero, std::integral_constant<int, 1>{}, std::integral_constant<int, kShortConvMaxWidth>{});
    if (s.channels % 4 == 0 && aligned16(pointers)) {
      return fn(zero, std::integral_constant<int, 4>{}, std::integral_constant<int, 4>{});
    }
    fn(zero, std::integral_constant<int, 1>{}, std::integral_constant<int, 4>{});
  });
}

dim3 conv_grid(ConvShape s, int v) {
  return dim3(static_cast<unsigned>(ceil_div(s.tokens, kBlockTokens)),
              static_cast<unsigned>(ceil_div(s.channels, int64_t{kGroups} * v)));
}

}  // namespace

void short_conv_silu_forward(Tensor out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                             const SeqLayout& seqs) {
  const ConvShape s{x.dim(0), x.dim(1), static_cast<int>(weight.dim(1))};
  if (s.tokens == 0 || s.channels == 0) return;
  const std::vector<void*> pieces = scratch_with_token_bounds(seqs, {});
  dispatch_conv(x, s, {out.raw(), x.raw()}, [&](auto zero, auto v, auto k) {
    using T = decltype(zero);
    const T* b = bias.defined() ? data_of<T>(bias) : nullptr;
    forward_kernel<T, decltype(v)::value, decltype(k)::value><<<conv_grid(s, v), dim3(kGroups, kRuns)>>>(
        data_of<T>(out), data_of<T>(x), data_of<T>(weight), b, static_cast<const int64_t*>(pieces[1]), s);
    check_launch("short_conv forward_kernel");
  });
}

void short_conv_silu_backward(Tensor dx, Tensor dweight, Tensor dbias, const Tensor& dout, const Tensor& x,
                              const Tensor& weight, const Tensor& bias, const SeqLayout& seqs) {
  const ConvShape s{x.dim(0), x.dim(1), static_cast<int>(weight.dim(1))};
  if (s.tokens == 0 || s.channels == 0) return;
  const int64_t blocks = ceil_div(s.tokens, kBlockTokens);
  const std::vector<void*> pieces =
      scratch_with_token_bounds(seqs, {static_cast<size_t>(blocks * s.channels * (s.width + 1)) * sizeof(float)});
  float* partials = static_cast<float*>(pieces[3]);
  dispatch_conv(x, s, {dx.raw(), dout.raw(), x.raw()}, [&](auto zero, auto v, auto k) {
    using T = decltype(zero);
    const T* b = bias.defined() ? data_of<T>(bias) : nullptr;
    backward_kernel<T, decltype(v)::value, decltype(k)::value><<<conv_grid(s, v), dim3(kGroups, kRuns)>>>(
        data_of<T>(dx), partials, data_of<T>(dout), data_of<T>(x), data_of<T>(weight), b,
        static_cast<const int64_t*>(pieces[1]), static_cast<const int64_t*>(pieces[2]), s);
    check_launch("short_conv backward_kernel");
    const int64_t cells = s.channels * s.width;
    add_partials(data_of<T>(dweight), partials, blocks, cells);
    if (dbias.defined()) add_partials(data_of<T>(dbias), partials + blocks * cells, blocks, s.channels);
  });
}

}  // namespace linea::cuda
