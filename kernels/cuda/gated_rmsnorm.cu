// RMSNorm over groups of channels with an optional output gate (serves ops::rmsnorm_* with one
// group per row and no gate, and ops::gated_rmsnorm_* with one group per head); the math of
// kernels/cpu/rmsnorm.h. For a group o of `dim` channels with gate input z and weight γ:
//   r = 1 / sqrt(Σ_j o_j² / dim + eps)   (saved, f32),   y_j = o_j · r · γ_j · act(z_j)
// With a residual (rmsnorm_forward_residual): o_j ← round_T(o_j + residual_j), written to sum and
// normed as stored (the same bits as add_inplace then the norm).
// Backward, with ô = o · r and du_j = dy_j · act(z_j):
//   dz_j = dy_j · ô_j · γ_j · act'(z_j)
//   do_j = r · (γ_j · du_j − ô_j · c),   c = (1/dim) Σ_i γ_i · du_i · ô_i
//   dγ_j += Σ_groups du_j · ô_j          (deterministic: block partials added in a fixed order)
// With a residual (rmsnorm_backward_residual): d_o_j = do_j + residual_j, added in f32 before the
// one rounding to T (the add of the residual stream's gradient fused into this pass).
// Recomputing (gated_rmsnorm_backward_recompute): groups in registers get r from a first read of
// o, as the forward computes it, and the second pass also writes the forward's y; groups read
// twice run the forward kernel (y and rstd, in scratch) and then the backward as it is.
//
// Layout. A group is `packs` packs of W channels (W = 16 bytes of elements when dim and the
// pointers allow, else 1) spread over L lanes, L the power of two ≥ packs, at most 32: a warp
// handles 32/L groups at once and a group's sums are shuffles within its L lanes. Lane s of a
// group owns the packs s, s + L, …, s + (P−1)·L of each chunk of L·P packs, P ≤ kMaxPacks the
// power of two that makes one chunk cover the group when it can (dim ≤ 32·kMaxPacks·W): the group
// is then read once and kept in registers between the two passes (the sum, then the outputs).
// Larger groups are walked chunk by chunk and read twice.
//
// Blocks handle fixed contiguous ranges of `block_groups` groups (a function of the shape alone,
// at most kMaxBlocks blocks), kWarps warps × 32/L groups at a time. Backward, with the group in
// registers, each lane adds du·ô of its channels over its groups in registers; at the end the
// block adds its lanes in a fixed order (a shuffle tree over the groups of a warp, then the warps
// in order) into partials[block · dim + j], and add_partials adds the blocks in a fixed order: dγ
// is the same bit for bit on every run. Groups read twice take dγ from the column sums of
// column_sums.cuh instead, computed before the kernel. d_o and dz may alias dout, and residual d_o:
// a lane writes only channels that it has already read, and the column sums read dout before the
// kernel runs.
#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/warp_reduce.cuh"

namespace linea::cuda {

namespace {
constexpr int kMaxPacks = 8;  // P at most
// 128 threads: at the ~150 registers of the backward for bf16 groups of 513–1024 channels, 3
// such blocks (12 warps) fit an SM, where one block of 256 threads would.
constexpr int kBlockThreads = 128;
constexpr int kWarps = kBlockThreads / kWarpSize;
constexpr int kMaxRegisterDim = kWarpSize * kMaxPacks * 8;  // the most channels a chunk holds (bf16's W = 8)
constexpr int64_t kMaxBlocks = 1024;                        // rows of dγ partials at most

// act(z) and act'(z) from one sigmoid ({1, 0} without a gate).
struct Gate {
  float value, derivative;
};
__device__ __forceinline__ Gate gate_of(ops::GateActivation act, float z) {
  if (act == ops::GateActivation::none) return {1.0f, 0.0f};
  const float s = sigmoid(z);
  if (act == ops::GateActivation::silu) return {z * s, s * (1.0f + z * (1.0f - s))};
  return {s, s * (1.0f - s)};
}

// y = ô · γ · act(z) for one pack of W entries (ô = o · r), stored at `out`; z is read only with a
// gate.
template <int W, class T>
__device__ __forceinline__ void store_output(T* out, const Pack<T, W>& o, float r, const Pack<T, W>& weight, const T* z,
                                             ops::GateActivation act) {
  const bool gated = act != ops::GateActivation::none;
  Pack<T, W> zv{}, yv;
  if (gated) zv = load_pack<W>(z);
#pragma unroll
  for (int e = 0; e < W; ++e) {
    const float gate = gated ? gate_of(act, to_float(zv.v[e])).value : 1.0f;
    yv.v[e] = from_float<T>(to_float(o.v[e]) * r * to_float(weight.v[e]) * gate);
  }
  store_pack<W>(out, yv);
}

struct GroupShape {
  int64_t groups, dim;
  ops::GateActivation act;
  int lanes;             // L
  int per_lane;          // P, the kernels' template argument
  int64_t chunks;        // 1: the group stays in registers
  int64_t block_groups;  // a multiple of the kWarps · 32/L groups a block handles at once
};

// The layout of the header comment for packs of w channels.
GroupShape layout(int64_t groups, int64_t dim, ops::GateActivation act, int w) {
  const int64_t packs = dim / w;
  GroupShape s{groups, dim, act, 1, 1, 0, 0};
  while (s.lanes < kWarpSize && s.lanes < packs) s.lanes *= 2;
  while (s.per_lane < kMaxPacks && int64_t{s.lanes} * s.per_lane < packs) s.per_lane *= 2;
  s.chunks = ceil_div(packs, int64_t{s.lanes} * s.per_lane);
  const int64_t at_once = int64_t{kWarps} * (kWarpSize / s.lanes);
  s.block_groups = at_once * ceil_div(groups, at_once * kMaxBlocks);
  return s;
}

int64_t block_count(const GroupShape& s) { return ceil_div(s.groups, s.block_groups); }

// Calls fn(std::integral_constant<int, P>{}) for P = per_lane (1, 2, 4 or kMaxPacks).
template <class Fn>
void dispatch_per_lane(int per_lane, Fn&& fn) {
  if (per_lane == 1) return fn(std::integral_constant<int, 1>{});
  if (per_lane == 2) return fn(std::integral_constant<int, 2>{});
  if (per_lane == 4) return fn(std::integral_constant<int, 4>{});
  fn(std::integral_constant<int, kMaxPacks>{});
}

// Where a thread works: the end of its block's groups, its warp's first group and the step to
// the next, its group within the warp (slot) and its lane within the group (sub).
struct Place {
  int64_t end, first, step;
  int warp, slot, sub;
  __device__ explicit Place(const GroupShape& s) {
    const int lane = threadIdx.x % kWarpSize, per_warp = kWarpSize / s.lanes;
    const int64_t begin = int64_t{blockIdx.x} * s.block_groups;
    warp = threadIdx.x / kWarpSize;
    end = min(s.groups, begin + s.block_groups);
    first = begin + int64_t{warp} * per_warp;
    step = int64_t{kWarps} * per_warp;
    slot = lane / s.lanes;
    sub = lane % s.lanes;
  }
  // The group's pack that is the lane's pack k of chunk ch.
  template <int P>
  __device__ int64_t pack(const GroupShape& s, int64_t ch, int k) const {
    return (ch * P + k) * s.lanes + sub;
  }
};

// Sum over the L lanes of a group (the xor stays within aligned runs of L lanes).
__device__ __forceinline__ float group_sum(float v, int lanes) {
  for (int offset = lanes / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// residual: null, or added to o in the first pass, the sum written to `sum` (which the second pass
// of groups read twice re-reads instead of o; sum may alias o or residual).
template <class T, int W, int P>
__global__ void __launch_bounds__(kBlockThreads)
    forward_kernel(T* out, float* rstd, const T* o, const T* z, const T* weight, const T* residual, T* sum,
                   GroupShape s, float eps) {
  const Place at(s);
  const int64_t packs = s.dim / W;
  for (int64_t first = at.first; first < at.end; first += at.step) {
    const int64_t g = first + at.slot, base = g * s.dim;
    const bool active = g < at.end;
    Pack<T, W> ov[P];
    float sum_sq = 0.0f;
    for (int64_t ch = 0; ch < s.chunks; ++ch) {
#pragma unroll
      for (int k = 0; k < P; ++k) {
        const int64_t q = at.pack<P>(s, ch, k);
        if (!active || q >= packs) continue;
        ov[k] = load_pack<W>(o + base + q * W);
        if (residual != nullptr) {
          const Pack<T, W> rv = load_pack<W>(residual + base + q * W);
#pragma unroll
          for (int e = 0; e < W; ++e) ov[k].v[e] = from_float<T>(to_float(ov[k].v[e]) + to_float(rv.v[e]));
          store_pack<W>(sum + base + q * W, ov[k]);
        }
#pragma unroll
        for (int e = 0; e < W; ++e) sum_sq += to_float(ov[k].v[e]) * to_float(ov[k].v[e]);
      }
    }
    const float r = 1.0f / sqrtf(group_sum(sum_sq, s.lanes) / static_cast<float>(s.dim) + eps);
    if (active && at.sub == 0) rstd[g] = r;
    for (int64_t ch = 0; ch < s.chunks; ++ch) {
#pragma unroll
      for (int k = 0; k < P; ++k) {
        const int64_t q = at.pack<P>(s, ch, k);
        if (!active || q >= packs) continue;
        if (s.chunks > 1) ov[k] = load_pack<W>((residual != nullptr ? sum : o) + base + q * W);
        store_output<W>(out + base + q * W, ov[k], r, load_pack<W>(weight + q * W), z + base + q * W, s.act);
      }
    }
  }
}

// partials[block · dim + j] = Σ over the block's lanes of dweight (a chunk's channels): a shuffle
// tree over the groups of each warp, then the warps in order.
template <int W, int P>
__device__ void write_block_partials(float* partials, float (&dweight)[P][W], const Place& at, const GroupShape& s) {
  __shared__ float row[kMaxRegisterDim];
  for (int offset = s.lanes; offset < kWarpSize; offset *= 2) {
#pragma unroll
    for (int k = 0; k < P; ++k) {
#pragma unroll
      for (int e = 0; e < W; ++e) dweight[k][e] += __shfl_xor_sync(0xffffffffu, dweight[k][e], offset);
    }
  }
  const int64_t packs = s.dim / W;
  for (int w = 0; w < kWarps; ++w) {
    if (at.warp == w && at.slot == 0) {
#pragma unroll
      for (int k = 0; k < P; ++k) {
        const int64_t q = at.pack<P>(s, 0, k);
        if (q >= packs) continue;
#pragma unroll
        for (int e = 0; e < W; ++e) {
          float& cell = row[q * W + e];
          cell = (w == 0 ? 0.0f : cell) + dweight[k][e];
        }
      }
    }
    __syncthreads();
  }
  float* block_row = partials + int64_t{blockIdx.x} * s.dim;
  for (int64_t j = threadIdx.x; j < s.dim; j += kBlockThreads) block_row[j] = row[j];
}

// With the group in registers (chunks = 1), the first pass also writes dz and adds du·ô to the
// lane's dγ sums, and the second writes do; else the second pass re-reads the chunk and writes
// both. partials: block_count(s) · dim floats, written when chunks = 1. residual: null or added to d_o.
template <class T, int W, int P>
__global__ void __launch_bounds__(kBlockThreads)
    backward_kernel(T* d_o, T* dz, float* partials, const T* dout, const T* o, const T* z, const T* weight,
                    const float* rstd, const T* residual, T* recompute_out, float eps, GroupShape s) {
  const Place at(s);
  const int64_t packs = s.dim / W;
  const bool gated = s.act != ops::GateActivation::none, cached = s.chunks == 1;
  float dweight[P][W] = {};
  for (int64_t first = at.first; first < at.end; first += at.step) {
    const int64_t g = first + at.slot, base = g * s.dim;
    const bool active = g < at.end;
    float r = active && recompute_out == nullptr ? rstd[g] : 0.0f;
    // Recomputing r (the host asks for it only with the group in registers, chunks = 1), as
    // forward_kernel computes it: the same sum order.
    if (recompute_out != nullptr) {
      float sum_sq = 0.0f;
#pragma unroll
      for (int k = 0; k < P; ++k) {
        const int64_t q = at.pack<P>(s, 0, k);
        if (!active || q >= packs) continue;
        const Pack<T, W> ov = load_pack<W>(o + base + q * W);
#pragma unroll
        for (int e = 0; e < W; ++e) sum_sq += to_float(ov.v[e]) * to_float(ov.v[e]);
      }
      r = 1.0f / sqrtf(group_sum(sum_sq, s.lanes) / static_cast<float>(s.dim) + eps);
    }
    Pack<T, W> ov[P];
    float du[P][W];
    // Reads the group's pack q as the lane's pack k: ov[k], du[k], γ (wv) and the pack's dz.
    auto read = [&](int k, int64_t q, Pack<T, W>& wv, Pack<T, W>& dzv) {
      const Pack<T, W> dy = load_pack<W>(dout + base + q * W);
      wv = load_pack<W>(weight + q * W);
      ov[k] = load_pack<W>(o + base + q * W);
      Pack<T, W> zv{};
      if (gated) zv = load_pack<W>(z + base + q * W);
#pragma unroll
      for (int e = 0; e < W; ++e) {
        const Gate gate = gated ? gate_of(s.act, to_float(zv.v[e])) : Gate{1.0f, 0.0f};
        const float y = to_float(dy.v[e]), o_hat = to_float(ov[k].v[e]) * r;
        du[k][e] = y * gate.value;
        dzv.v[e] = from_float<T>(y * o_hat * to_float(wv.v[e]) * gate.derivative);
      }
    };
    float c = 0.0f;
    for (int64_t ch = 0; ch < s.chunks; ++ch) {
#pragma unroll
      for (int k = 0; k < P; ++k) {
        const int64_t q = at.pack<P>(s, ch, k);
        if (!active || q >= packs) continue;
        Pack<T, W> wv, dzv;
        read(k, q, wv, dzv);
#pragma unroll
        for (int e = 0; e < W; ++e) {
          const float o_hat = to_float(ov[k].v[e]) * r;
          c += to_float(wv.v[e]) * du[k][e] * o_hat;
          if (cached) dweight[k][e] += du[k][e] * o_hat;
        }
        if (cached && gated) store_pack<W>(dz + base + q * W, dzv);
      }
    }
    c = group_sum(c, s.lanes) / static_cast<float>(s.dim);
    for (int64_t ch = 0; ch < s.chunks; ++ch) {
#pragma unroll
      for (int k = 0; k < P; ++k) {
        const int64_t q = at.pack<P>(s, ch, k);
        if (!active || q >= packs) continue;
        Pack<T, W> wv, dov, rv{};
        if (residual != nullptr) rv = load_pack<W>(residual + base + q * W);
        if (cached) {
          wv = load_pack<W>(weight + q * W);
        } else {
          Pack<T, W> dzv;
          read(k, q, wv, dzv);
          if (gated) store_pack<W>(dz + base + q * W, dzv);
        }
#pragma unroll
        for (int e = 0; e < W; ++e) {
          const float o_hat = to_float(ov[k].v[e]) * r;
          const float added = residual != nullptr ? to_float(rv.v[e]) : 0.0f;
          dov.v[e] = from_float<T>(r * (to_float(wv.v[e]) * du[k][e] - o_hat * c) + added);
        }
        store_pack<W>(d_o + base + q * W, dov);
        if (recompute_out != nullptr) {  // as forward_kernel writes it
          store_output<W>(recompute_out + base + q * W, ov[k], r, wv, z + base + q * W, s.act);
        }
      }
    }
  }
  if (cached) write_block_partials<W, P>(partials, dweight, at, s);
}

// f(g, j) = du_j · ô_j of group g, for the column sums of groups read twice.
template <class T>
struct WeightGradientTerm {
  const T *dout, *o, *z;
  const float* rstd;
  GroupShape s;
  __device__ float operator()(int64_t g, int64_t j) const {
    const int64_t i = g * s.dim + j;
    const float gate = s.act == ops::GateActivation::none ? 1.0f : gate_of(s.act, to_float(z[i])).value;
    return to_float(dout[i]) * gate * to_float(o[i]) * rstd[g];
  }
};
}  // namespace

void gated_rmsnorm_forward(Tensor out, Tensor rstd, const Tensor& o, const Tensor& z, const Tensor& weight,
                           int64_t heads, ops::GateActivation act, double eps, const Tensor& residual, Tensor sum) {
  const int64_t groups = o.dim(0) * heads, dim = o.dim(1) / heads;
  if (groups == 0) return;
  dispatch_float(o.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* z_data = act == ops::GateActivation::none ? nullptr : data_of<T>(z);
    const T* residual_data = residual.defined() ? data_of<T>(residual) : nullptr;
    T* sum_data = residual.defined() ? data_of<T>(sum) : nullptr;
    const bool packed =
        dim % kPackWidth<T> == 0 && aligned16({out.raw(), o.raw(), z_data, weight.raw(), residual_data, sum_data});
    dispatch_pack_width<T>(packed, [&](auto width) {
      constexpr int W = decltype(width)::value;
      const GroupShape s = layout(groups, dim, act, W);
      dispatch_per_lane(s.per_lane, [&](auto per_lane) {
        forward_kernel<T, W, decltype(per_lane)::value><<<static_cast<unsigned>(block_count(s)), kBlockThreads>>>(
            data_of<T>(out), data_of<float>(rstd), data_of<T>(o), z_data, data_of<T>(weight), residual_data, sum_data,
            s, static_cast<float>(eps));
      });
    });
    check_launch("gated_rmsnorm forward_kernel");
  });
}

void gated_rmsnorm_backward(Tensor d_o, Tensor dz, Tensor dweight, const Tensor& dout, const Tensor& o, const Tensor& z,
                            const Tensor& weight, const Tensor& rstd, int64_t heads, ops::GateActivation act,
                            const Tensor& residual, Tensor recompute_out, double eps) {
  const int64_t groups = o.dim(0) * heads, dim = o.dim(1) / heads;
  if (groups == 0) return;
  dispatch_float(o.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* z_data = act == ops::GateActivation::none ? nullptr : data_of<T>(z);
    T* dz_data = act == ops::GateActivation::none ? nullptr : data_of<T>(dz);
    const T* residual_data = residual.defined() ? data_of<T>(residual) : nullptr;
    T* out_data = recompute_out.defined() ? data_of<T>(recompute_out) : nullptr;
    const bool packed = dim % kPackWidth<T> == 0 && aligned16({d_o.raw(), dz_data, dout.raw(), o.raw(), z_data,
                                                               weight.raw(), residual_data, out_data});
    dispatch_pack_width<T>(packed, [&](auto width) {
      constexpr int W = decltype(width)::value;
      const GroupShape s = layout(groups, dim, act, W);
      const bool cached = s.chunks == 1;
      const int64_t blocks = block_count(s);
      const size_t bytes =
          cached ? static_cast<size_t>(blocks * dim) * sizeof(float) : column_sum_partials_bytes(groups, dim);
      // Groups read twice that recompute: the forward kernel first (y, and r into scratch), then the
      // backward as it is (y is written before dout is read: recompute_out must not alias dout).
      const bool forward_first = out_data != nullptr && !cached;
      const std::vector<void*> pieces =
          scratch({bytes, forward_first ? static_cast<size_t>(groups) * sizeof(float) : size_t{0}});
      float* partials = static_cast<float*>(pieces[0]);
      const float* rstd_data = out_data == nullptr ? data_of<float>(rstd) : static_cast<float*>(pieces[1]);
      if (forward_first) {
        dispatch_per_lane(s.per_lane, [&](auto per_lane) {
          forward_kernel<T, W, decltype(per_lane)::value><<<static_cast<unsigned>(blocks), kBlockThreads>>>(
              out_data, static_cast<float*>(pieces[1]), data_of<T>(o), z_data, data_of<T>(weight), nullptr, nullptr, s,
              static_cast<float>(eps));
        });
        check_launch("gated_rmsnorm forward_kernel");
        out_data = nullptr;
      }
      // Before the kernel: d_o and dz may alias dout.
      if (!cached) {
        add_column_sums(data_of<T>(dweight), partials, groups, dim,
                        WeightGradientTerm<T>{data_of<T>(dout), data_of<T>(o), z_data, rstd_data, s});
      }
      dispatch_per_lane(s.per_lane, [&](auto per_lane) {
        backward_kernel<T, W, decltype(per_lane)::value><<<static_cast<unsigned>(blocks), kBlockThreads>>>(
            data_of<T>(d_o), dz_data, partials, data_of<T>(dout), data_of<T>(o), z_data, data_of<T>(weight), rstd_data,
            residual_data, out_data, static_cast<float>(eps), s);
      });
      check_launch("gated_rmsnorm backward_kernel");
      if (cached) add_partials(data_of<T>(dweight), partials, blocks, dim);
    });
  });
}

}  // namespace linea::cuda
