// RMSNorm over groups of channels with an optional output gate (serves ops::rmsnorm_* with one
// group per row and no gate, and ops::gated_rmsnorm_* with one group per head); the math of
// kernels/cpu/rmsnorm.h. For a group o of `dim` channels with gate input z and weight γ:
//   r = 1 / sqrt(Σ_j o_j² / dim + eps)   (saved, f32),   y_j = o_j · r · γ_j · act(z_j)
// Backward, with ô = o · r and du_j = dy_j · act(z_j):
//   dz_j = dy_j · ô_j · γ_j · act'(z_j)
//   do_j = r · (γ_j · du_j − ô_j · c),   c = (1/dim) Σ_i γ_i · du_i · ô_i
//   dγ_j += Σ_groups du_j · ô_j          (deterministic column sums, kernels/cuda/column_sums.cuh)
// One warp per group: lanes stride over the channels (16-byte packs when aligned), the sums are
// warp reductions.
#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/warp_reduce.cuh"

namespace linea::cuda {

namespace {
// act(z) (1 when there is no gate) and act'(z).
__device__ __forceinline__ float gate_value(ops::GateActivation act, float z) {
  if (act == ops::GateActivation::silu) return silu(z);
  if (act == ops::GateActivation::sigmoid) return sigmoid(z);
  return 1.0f;
}
__device__ __forceinline__ float gate_derivative(ops::GateActivation act, float z) {
  if (act == ops::GateActivation::silu) return silu_grad(z);
  const float s = sigmoid(z);
  return s * (1.0f - s);
}

template <class T>
__device__ __forceinline__ float gate_at(ops::GateActivation act, const T* z, int64_t i) {
  return act == ops::GateActivation::none ? 1.0f : gate_value(act, to_float(z[i]));
}

struct GroupShape {
  int64_t groups, dim;
  ops::GateActivation act;
};

// Lane l of a group's warp handles the packs l, l + 32, … of W channels.
template <class T, int W>
__global__ void forward_kernel(T* out, float* rstd, const T* o, const T* z, const T* weight, GroupShape s, float eps) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / kWarpSize;
  const bool gated = s.act != ops::GateActivation::none;
  for (int64_t g = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / kWarpSize; g < s.groups; g += warps) {
    const int64_t base = g * s.dim;
    float sum_sq = 0.0f;
    for (int64_t j = int64_t{lane} * W; j < s.dim; j += kWarpSize * W) {
      const Pack<T, W> ov = load_pack<W>(o + base + j);
#pragma unroll
      for (int e = 0; e < W; ++e) sum_sq += to_float(ov.v[e]) * to_float(ov.v[e]);
    }
    const float r = 1.0f / sqrtf(warp_sum(sum_sq) / static_cast<float>(s.dim) + eps);
    if (lane == 0) rstd[g] = r;
    for (int64_t j = int64_t{lane} * W; j < s.dim; j += kWarpSize * W) {
      const Pack<T, W> ov = load_pack<W>(o + base + j), wv = load_pack<W>(weight + j);
      Pack<T, W> zv{}, yv;
      if (gated) zv = load_pack<W>(z + base + j);
#pragma unroll
      for (int e = 0; e < W; ++e) {
        const float gate = gated ? gate_value(s.act, to_float(zv.v[e])) : 1.0f;
        yv.v[e] = from_float<T>(to_float(ov.v[e]) * r * to_float(wv.v[e]) * gate);
      }
      store_pack<W>(out + base + j, yv);
    }
  }
}

template <class T, int W>
__global__ void input_gradient_kernel(T* d_o, T* dz, const T* dout, const T* o, const T* z, const T* weight,
                                      const float* rstd, GroupShape s) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / kWarpSize;
  const bool gated = s.act != ops::GateActivation::none;
  for (int64_t g = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / kWarpSize; g < s.groups; g += warps) {
    const int64_t base = g * s.dim;
    const float r = rstd[g];
    float c = 0.0f;
    for (int64_t j = int64_t{lane} * W; j < s.dim; j += kWarpSize * W) {
      const Pack<T, W> dy = load_pack<W>(dout + base + j), ov = load_pack<W>(o + base + j);
      const Pack<T, W> wv = load_pack<W>(weight + j);
      Pack<T, W> zv{};
      if (gated) zv = load_pack<W>(z + base + j);
#pragma unroll
      for (int e = 0; e < W; ++e) {
        const float gate = gated ? gate_value(s.act, to_float(zv.v[e])) : 1.0f;
        c += to_float(wv.v[e]) * to_float(dy.v[e]) * gate * to_float(ov.v[e]) * r;
      }
    }
    c = warp_sum(c) / static_cast<float>(s.dim);
    for (int64_t j = int64_t{lane} * W; j < s.dim; j += kWarpSize * W) {
      const Pack<T, W> dy = load_pack<W>(dout + base + j), ov = load_pack<W>(o + base + j);
      const Pack<T, W> wv = load_pack<W>(weight + j);
      Pack<T, W> zv{}, dov, dzv;
      if (gated) zv = load_pack<W>(z + base + j);
#pragma unroll
      for (int e = 0; e < W; ++e) {
        const float y = to_float(dy.v[e]), w = to_float(wv.v[e]), o_hat = to_float(ov.v[e]) * r;
        const float zj = to_float(zv.v[e]);
        const float gate = gated ? gate_value(s.act, zj) : 1.0f;
        dov.v[e] = from_float<T>(r * (w * y * gate - o_hat * c));
        if (gated) dzv.v[e] = from_float<T>(y * o_hat * w * gate_derivative(s.act, zj));
      }
      store_pack<W>(d_o + base + j, dov);
      if (gated) store_pack<W>(dz + base + j, dzv);
    }
  }
}

// f(g, j) = du_j · ô_j of group g
template <class T>
struct WeightGradientTerm {
  const T *dout, *o, *z;
  const float* rstd;
  GroupShape s;
  __device__ float operator()(int64_t g, int64_t j) const {
    const int64_t i = g * s.dim + j;
    return to_float(dout[i]) * gate_at(s.act, z, i) * to_float(o[i]) * rstd[g];
  }
};

int warp_blocks(int64_t groups) { return grid_stride_blocks(groups * kWarpSize); }
}  // namespace

void gated_rmsnorm_forward(Tensor out, Tensor rstd, const Tensor& o, const Tensor& z, const Tensor& weight,
                           int64_t heads, ops::GateActivation act, double eps) {
  const GroupShape s{o.dim(0) * heads, o.dim(1) / heads, act};
  if (s.groups == 0) return;
  dispatch_float(o.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* z_data = act == ops::GateActivation::none ? nullptr : data_of<T>(z);
    const bool packed = s.dim % kPackWidth<T> == 0 && aligned16({out.raw(), o.raw(), z_data, weight.raw()});
    dispatch_pack_width<T>(packed, [&](auto width) {
      forward_kernel<T, decltype(width)::value><<<warp_blocks(s.groups), kThreadsPerBlock>>>(
          data_of<T>(out), data_of<float>(rstd), data_of<T>(o), z_data, data_of<T>(weight), s, static_cast<float>(eps));
    });
    check_launch("gated_rmsnorm forward_kernel");
  });
}

void gated_rmsnorm_backward(Tensor d_o, Tensor dz, Tensor dweight, const Tensor& dout, const Tensor& o, const Tensor& z,
                            const Tensor& weight, const Tensor& rstd, int64_t heads, ops::GateActivation act) {
  const GroupShape s{o.dim(0) * heads, o.dim(1) / heads, act};
  if (s.groups == 0) return;
  dispatch_float(o.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* z_data = act == ops::GateActivation::none ? nullptr : data_of<T>(z);
    T* dz_data = act == ops::GateActivation::none ? nullptr : data_of<T>(dz);
    // dγ first: do and dz may alias dout.
    float* partials = static_cast<float*>(scratch({column_sum_partials_bytes(s.groups, s.dim)})[0]);
    add_column_sums(data_of<T>(dweight), partials, s.groups, s.dim,
                    WeightGradientTerm<T>{data_of<T>(dout), data_of<T>(o), z_data, data_of<float>(rstd), s});
    const bool packed =
        s.dim % kPackWidth<T> == 0 && aligned16({d_o.raw(), dz_data, dout.raw(), o.raw(), z_data, weight.raw()});
    dispatch_pack_width<T>(packed, [&](auto width) {
      input_gradient_kernel<T, decltype(width)::value>
          <<<warp_blocks(s.groups), kThreadsPerBlock>>>(data_of<T>(d_o), dz_data, data_of<T>(dout), data_of<T>(o),
                                                        z_data, data_of<T>(weight), data_of<float>(rstd), s);
    });
    check_launch("gated_rmsnorm input_gradient_kernel");
  });
}

}  // namespace linea::cuda
