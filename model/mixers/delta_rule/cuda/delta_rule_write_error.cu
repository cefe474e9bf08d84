// The write error r of the f32 pipeline (reference/mixers.md §5.1; the CPU's write_error and its
// backward in model/mixers/delta_rule/cpu/delta_rule_chunked.cpp), one block per chunk and head, from what the
// forward pass has: S0 (the state entering the chunk), Ũ (the vectors it writes) and G.
//
// r_t = τ_t − S'ᵀρ_t, the prediction from the decayed state before token t. erase_write (GDN-2):
// τ = w ⊙ v, ρ = b ⊙ k, so r = Ũ itself. beta (DeltaNet, GDN, KDA): τ = v, ρ = k, and within a
// chunk (γ_i = exp(G_i), e_ijd = exp(G_id − G_jd), every exponent ≤ 0)
//   R = V − (K ⊙ γ) S0 − M Ũ,   M_ij = Σ_d k_id k_jd e_ijd  (j < i; the Gram A without β),
// formed without dividing by β. Its backward, with dR = ∂L/∂R:
//   dŨ −= Mᵀ dR                                   (write_error_local, before the state pass)
//   ∂L/∂S0 −= (K ⊙ γ)ᵀ dR                         (the state pass, from KgNeg = −K ⊙ γ and dR)
//   dv += dR;  with dK̃ = −dR S0ᵀ (∂L/∂(K ⊙ γ)) and dM = −dR Ũᵀ (j < i):
//   dk_id += dK̃_id γ_id + row_id + col_id,   row_id = Σ_{j<i} dM_ij k_jd e_ijd,
//                                             col_id = Σ_{m>i} dM_mi k_md e_mid
//   dG_id  = k_id (dK̃_id γ_id + row_id − col_id),  dg_t += Σ_{s≥t} dG_s    (write_error_gradients)
// (a scalar decay sums dG over the channels; erase_write needs only dŨ += dR). The pair sums run
// entry by entry in a fixed order, the products on block_gemm: results repeat bit for bit.
#include "kernels/chunk/cuda/block_gemm.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/warp_reduce.cuh"
#include "model/mixers/delta_rule/cuda/delta_rule_chunk.cuh"

namespace linea::cuda::delta {

namespace {

constexpr int kPitch = kChunk + 1;
using Beta = GateConstant<ops::GateKind::beta>;

template <ops::DecayKind kDecay>
using BetaChunk = ChunkRef<kDecay, ops::GateKind::beta>;

// M_ij = Σ_d k_id k_jd e_ijd for j < i, 0 for j ≥ i (i, j < L). Ends with the block synchronised.
template <ops::DecayKind kDecay>
__device__ void key_gram(const BetaChunk<kDecay>& c, float (*M)[kPitch], BlockGemmTiles& tiles) {
  const int L = c.len, K = c.x.key_dim;
  if constexpr (kDecay != ops::DecayKind::channel) {
    // One decay factor per pair: a product of token rows, masked and scaled.
    const Strided<float> key_rows{c.x.k + c.key(0, 0), int64_t{c.x.heads} * K};
    block_gemm<gemm::b_k_fast>(
        L, L, K, key_rows, key_rows, [&](int i, int j, float s) { M[i][j] = j < i ? s * c.between(i, j, 0) : 0.0f; },
        tiles);
  } else {
    // Per channel: one warp per row i, its lanes over the channels, a warp sum per pair.
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize, warps = blockDim.x / kWarpSize;
    for (int i = warp; i < L; i += warps) {
      for (int j = 0; j < L; ++j) {
        float s = 0.0f;
        if (j < i) {
          for (int d = lane; d < K; d += kWarpSize) s += c.k(i, d) * c.k(j, d) * c.between(i, j, d);
          s = warp_sum(s);
        }
        if (lane == 0) M[i][j] = s;
      }
    }
    __syncthreads();
  }
}

// R = V − (K ⊙ γ) S0 − M Ũ
template <ops::DecayKind kDecay>
__global__ void __launch_bounds__(kThreads) write_error_kernel(Operands x, Chunks chunks, Workspace ws, float* r) {
  __shared__ float M[kChunk][kPitch];
  __shared__ BlockGemmTiles tiles;
  const int64_t chunk = blockIdx.x;
  const int head = blockIdx.y;
  const int K = x.key_dim, V = x.value_dim;
  const BetaChunk<kDecay> c(x, chunks, ws.G, chunk, head);
  const float* S0 = ws.S + (chunk * x.heads + head) * K * V;
  key_gram(c, M, tiles);
  block_gemm_sum(
      c.len, V, [&](int i, int e, float p) { r[c.value(i, e)] = c.v(i, e) - p; }, tiles,
      gemm_term(
          K, [&](int i, int d) { return c.k(i, d) * c.gamma(i, d); }, Strided<float>{S0, V}),
      gemm_term(
          c.len, [&](int i, int j) { return M[i][j]; }, Strided<float>{ws.Ut + c.value(0, 0), int64_t{x.heads} * V}));
}

// dŨ −= Mᵀ dR and KgNeg = −K ⊙ γ
template <ops::DecayKind kDecay>
__global__ void __launch_bounds__(kThreads)
    write_error_local_kernel(Operands x, Chunks chunks, Workspace ws, const float* dr, GradWorkspace gws) {
  __shared__ float M[kChunk][kPitch];
  __shared__ BlockGemmTiles tiles;
  const int64_t chunk = blockIdx.x;
  const int head = blockIdx.y;
  const int K = x.key_dim, V = x.value_dim;
  const BetaChunk<kDecay> c(x, chunks, ws.G, chunk, head);
  const int L = c.len;
  key_gram(c, M, tiles);
  block_gemm<gemm::a_m_fast>(
      L, V, L, [&](int j, int i) { return M[i][j]; }, Strided<float>{dr + c.value(0, 0), int64_t{x.heads} * V},
      [&](int j, int e, float s) { gws.dUt[c.value(j, e)] -= s; }, tiles);
  for_each_batched<4>(
      L * K, [&](int p) { return -c.k(p / K, p % K) * c.gamma(p / K, p % K); },
      [&](int p, float kg) { gws.KgNeg[c.key(p / K, p % K)] = kg; });
}

struct Outputs {
  float *dk, *dv, *dg;
};

// dv, dk and dg's terms from R (see the top of the file). Dynamic shared memory: dG [L][K] with a
// decay.
template <ops::DecayKind kDecay>
__global__ void __launch_bounds__(kThreads)
    write_error_gradients_kernel(Operands x, Chunks chunks, Workspace ws, const float* dr, Outputs out) {
  extern __shared__ float dG[];
  __shared__ float dM[kChunk][kPitch];
  __shared__ BlockGemmTiles tiles;
  const int64_t chunk = blockIdx.x;
  const int head = blockIdx.y;
  const int K = x.key_dim, V = x.value_dim;
  const BetaChunk<kDecay> c(x, chunks, ws.G, chunk, head);
  const int L = c.len;
  const float* S0 = ws.S + (chunk * x.heads + head) * K * V;
  const int64_t value_stride = int64_t{x.heads} * V;
  const Strided<float> dr_rows{dr + c.value(0, 0), value_stride};

  // dM = −dR Ũᵀ (j < i)
  block_gemm<gemm::b_k_fast>(
      L, L, V, dr_rows, Strided<float>{ws.Ut + c.value(0, 0), value_stride},
      [&](int i, int j, float s) { dM[i][j] = j < i ? -s : 0.0f; }, tiles);
  // dK̃ = −dR S0ᵀ, each entry finished where it lands: dk and dG.
  block_gemm<gemm::b_k_fast>(
      L, K, V, dr_rows, Strided<float>{S0, V},
      [&](int i, int d, float s) {
        const float k = c.k(i, d), dk_state = -s * c.gamma(i, d);  // dK̃_id γ_id
        float row = 0.0f, col = 0.0f;
        for (int j = 0; j < i; ++j) row += dM[i][j] * c.k(j, d) * c.between(i, j, d);
        for (int m = i + 1; m < L; ++m) col += dM[m][i] * c.k(m, d) * c.between(m, i, d);
        out.dk[c.key(i, d)] += dk_state + row + col;
        if constexpr (kDecay != ops::DecayKind::none) dG[i * K + d] = k * (dk_state + row - col);
      },
      tiles);
  for_each_batched<4>(
      L * V, [&](int p) { return dr[c.value(p / V, p % V)]; },
      [&](int p, float d) { out.dv[c.value(p / V, p % V)] += d; });

  // G_t = Σ_{s≤t} g_s  ⇒  dg_t += Σ_{s≥t} dG_s (block_gemm returned synchronised: dG is complete)
  if constexpr (kDecay == ops::DecayKind::channel) {
    for (int d = threadIdx.x; d < K; d += blockDim.x) {
      float after = 0.0f;
      for (int i = L - 1; i >= 0; --i) {
        after += dG[i * K + d];
        out.dg[c.key(i, d)] += after;
      }
    }
  } else if constexpr (kDecay == ops::DecayKind::scalar) {
    __shared__ float dG_rows[kChunk];
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize, warps = blockDim.x / kWarpSize;
    for (int i = warp; i < L; i += warps) {
      float s = 0.0f;
      for (int d = lane; d < K; d += kWarpSize) s += dG[i * K + d];
      s = warp_sum(s);
      if (lane == 0) dG_rows[i] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      float after = 0.0f;
      for (int i = L - 1; i >= 0; --i) {
        after += dG_rows[i];
        out.dg[c.row(i)] += after;
      }
    }
  }
}

int64_t value_entries(const Call& call) { return call.tokens * call.heads * int64_t{call.value_dim}; }

}  // namespace

void write_error(const Call& call, const Workspace& ws, float* r) {
  if (call.chunks.count == 0) return;
  if (call.gate == ops::GateKind::erase_write) {
    check_cuda(cudaMemcpyAsync(r, ws.Ut, sizeof(float) * value_entries(call), cudaMemcpyDeviceToDevice, 0),
               "cudaMemcpyAsync (delta_rule write error r = Ũ)");
    return;
  }
  dispatch_kinds(call, [&](auto decay, auto gate) {
    if constexpr (std::is_same_v<decltype(gate), Beta>) {
      write_error_kernel<decltype(decay)::value><<<chunk_grid(call), kThreads>>>(operands(call), call.chunks, ws, r);
      check_launch("delta_rule write_error_kernel");
    }
  });
}

void write_error_local(const Call& call, const Workspace& ws, const float* dr, const GradWorkspace& gws) {
  if (call.chunks.count == 0) return;
  if (call.gate == ops::GateKind::erase_write) {
    const Shape entries{value_entries(call)};  // dŨ += dR (r = Ũ)
    add_inplace(Tensor::view(gws.dUt, entries, DType::f32, Device::cuda),
                Tensor::view(const_cast<float*>(dr), entries, DType::f32, Device::cuda));
    return;
  }
  dispatch_kinds(call, [&](auto decay, auto gate) {
    if constexpr (std::is_same_v<decltype(gate), Beta>) {
      write_error_local_kernel<decltype(decay)::value>
          <<<chunk_grid(call), kThreads>>>(operands(call), call.chunks, ws, dr, gws);
      check_launch("delta_rule write_error_local_kernel");
    }
  });
}

void write_error_gradients(const Call& call, const Workspace& ws, const float* dr, const GradientOutputs& out) {
  if (call.chunks.count == 0 || call.gate != ops::GateKind::beta) return;
  dispatch_kinds(call, [&](auto decay, auto gate) {
    if constexpr (std::is_same_v<decltype(gate), Beta>) {
      constexpr ops::DecayKind kDecay = decltype(decay)::value;
      const auto kernel = write_error_gradients_kernel<kDecay>;
      const size_t bytes =
          kDecay == ops::DecayKind::none ? 0 : sizeof(float) * kChunk * static_cast<size_t>(call.key_dim);
      allow_shared_memory(reinterpret_cast<const void*>(kernel), bytes);
      const Outputs typed{static_cast<float*>(out.dk), static_cast<float*>(out.dv), out.dg};
      kernel<<<chunk_grid(call), kThreads, bytes>>>(operands(call), call.chunks, ws, dr, typed);
      check_launch("delta_rule write_error_gradients_kernel");
    }
  });
}

}  // namespace linea::cuda::delta
