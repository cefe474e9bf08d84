// chunk_gradients: every input gradient of one chunk of one head (one block each), given what the
// forward and reverse passes stored: S0 (state entering the chunk), dS (∂L/∂ state at its end), Ũ
// and dŨ (complete). It differentiates, line by line, model/mixers/delta_rule/cpu/delta_rule_chunked.cpp's
// backward_chunk (e_ijd = exp(G_id − G_jd), L the chunk's length, b the erase gate, w the write gate):
//   1. dW = −dŨ S0ᵀ,   dX = Tᵀ dŨ,   dP_ij = scale Σ_e dO_ie Ũ_je (j ≤ i)
//   2. dY = Tᵀ dW
//   3. dA_ij = −(Σ_e dX_ie U_je + Σ_d dY_id W_jd)   (j < i)
//   4. per key entry (i, d), with dq̂ = scale (dO S0ᵀ)_id, dk̂ = (Ũ dSᵀ)_id, dek = Σ_{j<i} dA_ij k_jd e_ijd:
//        dq = dq̂ γ + Σ_{j≤i} dP_ij k_jd e_ijd
//        dk = dk̂ exp(G_L − G_i) + γ b dY + b·dek + Σ_{m>i} dA_mi b_md k_md e_mid + Σ_{m≥i} dP_mi q_md e_mid
//        db = γ k dY + k·dek
//        dG = dq̂ q γ + dY b k γ + b k dek − k Σ_{m>i} dA_mi b_md k_md e_mid
//             + q Σ_{j<i} dP_ij k_jd e_ijd − k Σ_{m>i} dP_mi q_md e_mid
//             (+ γ_L Σ_e S0_de dS_de at the last row), and r = dk̂ k exp(G_L − G_i)
//      (the diagonal pairs, e = 1, add and remove the same amount in dG and are left out)
//   5. per value entry (i, e): dv = dX w, dw = dX v
//   6. dg_i = Σ_{s≥i} dG_s + Σ_{s<i} r_s (G_i = Σ_{s≤i} g_s, and exp(G_L − G_s) enters G_L with + and
//      G_s with −; r_{L−1} cancels exactly); a scalar decay sums dG and r over the channels first
//      (then down the rows), and β sums db over the key channels and dw over the value channels.
// The sums run in a fixed order (block_gemm, one thread per entry, warp sums per row): no atomics.
#include "kernels/chunk/cuda/block_gemm.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/warp_reduce.cuh"
#include "model/mixers/delta_rule/cuda/delta_rule_chunk.cuh"

namespace linea::cuda::delta {

namespace {

struct Outputs {
  float *dq, *dk, *dv, *dbeta, *db, *dw;
  float* dg;
};

constexpr int kPitch = kChunk + 1;
constexpr int kSubChunk = 16;  // row pitch of the C×C tiles in shared memory
constexpr size_t kGradientSharedBytes = sizeof(float) * 3 * kChunk * kPitch;

template <ops::DecayKind kDecay, ops::GateKind kGate>
__global__ void __launch_bounds__(kThreads, 2)
    chunk_gradients_kernel(Operands x, Chunks chunks, Workspace ws, const float* d_o, GradWorkspace gws, Outputs out) {
  extern __shared__ float shared[];
  float* dP = shared;                  // [C][kPitch]
  float* dA = dP + kChunk * kPitch;    // [C][kPitch]
  float* pair = dA + kChunk * kPitch;  // scalar decay: exp(G_i − G_j), j ≤ i
  __shared__ BlockGemmTiles tiles;
  const int64_t chunk = blockIdx.x;
  const int head = blockIdx.y;
  const int K = x.key_dim, V = x.value_dim;
  const ChunkRef<kDecay, kGate> c(x, chunks, ws.G, chunk, head);
  const int L = c.len;
  const float* S0 = ws.S + (chunk * x.heads + head) * K * V;
  const float* dS = gws.dS + (chunk * x.heads + head) * K * V;
  const float* T = ws.T + (chunk * x.heads + head) * kChunk * kChunk;
  const auto e_of = [&](int i, int j, int d) {
    if constexpr (kDecay == ops::DecayKind::scalar) {
      return pair[i * kPitch + j];
    } else {
      return c.between(i, j, d);
    }
  };

  // 1. (the pair decays of a scalar decay first, for step 4)
  if constexpr (kDecay == ops::DecayKind::scalar) {
    for (int p = threadIdx.x; p < L * L; p += blockDim.x) {
      const int i = p / L, j = p % L;
      pair[i * kPitch + j] = j <= i ? c.between(i, j, 0) : 0.0f;
    }
  }
  // Operands read straight from memory: rows of the chunk ([N, H, ·] layouts), the states (e ↦ column
  // d of S0 and dS is row d of the [K, V] state), and Tᵀ (column i of T, zero above the diagonal).
  const int64_t key_stride = int64_t{x.heads} * K, value_stride = int64_t{x.heads} * V;
  const Strided<float> d_out_rows{d_o + c.value(0, 0), value_stride}, key_rows{x.k + c.key(0, 0), key_stride},
      query_rows{x.q + c.key(0, 0), key_stride};
  const Strided<float> Ut_rows{ws.Ut + c.value(0, 0), value_stride}, dUt_rows{gws.dUt + c.value(0, 0), value_stride},
      dW_rows{gws.dW + c.key(0, 0), key_stride}, S0_rows{S0, V}, dS_rows{dS, V}, T_columns{T, kChunk};
  block_gemm<gemm::b_k_fast>(
      L, L, V, d_out_rows, Ut_rows, [&](int i, int j, float s) { dP[i * kPitch + j] = j <= i ? x.scale * s : 0.0f; },
      tiles);
  block_gemm<gemm::b_k_fast>(
      L, K, V, d_out_rows, S0_rows, [&](int i, int d, float s) { gws.dQd[c.key(i, d)] = x.scale * s; }, tiles);
  block_gemm<gemm::b_k_fast>(
      L, K, V, Ut_rows, dS_rows, [&](int i, int d, float s) { gws.dKe[c.key(i, d)] = s; }, tiles);
  block_gemm<gemm::b_k_fast>(
      L, K, V, dUt_rows, S0_rows, [&](int i, int d, float s) { gws.dW[c.key(i, d)] = -s; }, tiles);
  block_gemm<gemm::a_m_fast>(
      L, V, L, T_columns, dUt_rows, [&](int i, int e, float s) { gws.dX[c.value(i, e)] = s; }, tiles);
  __syncthreads();

  // 2.
  block_gemm<gemm::a_m_fast>(
      L, K, L, T_columns, dW_rows, [&](int i, int d, float s) { gws.dY[c.key(i, d)] = s; }, tiles);
  __syncthreads();

  // 3. One sum: dX Uᵀ + dY Wᵀ.
  block_gemm_sum<gemm::b_k_fast>(
      L, L, [&](int i, int j, float s) { dA[i * kPitch + j] = j < i ? -s : 0.0f; }, tiles,
      gemm_term(V, Strided<float>{gws.dX + c.value(0, 0), value_stride},
                Strided<float>{ws.U + c.value(0, 0), value_stride}),
      gemm_term(K, Strided<float>{gws.dY + c.key(0, 0), key_stride}, Strided<float>{ws.W + c.key(0, 0), key_stride}));
  __syncthreads();

  // 3b. Step 4's sums over pairs as products. They land in dW, dG, r and db (free until step 4
  // reads each entry back, and then overwrites it, in the same thread):
  //   dek_i = Σ_{j<i} dA_ij k_j e_ij,  dp_row_i = Σ_{j<i} dP_ij k_j e_ij,
  //   da_col_i = Σ_{m>i} dA_mi b_m k_m e_mi,  dp_col_i = Σ_{m>i} dP_mi q_m e_mi.
  const auto erase_key_row = [&](int m, int d) { return c.erase(m, d) * c.k(m, d); };
  if constexpr (kDecay != ops::DecayKind::channel) {
    // e_ij is one factor per pair: with Ã = dA ⊙ e and P̃ = dP ⊙ e (j < i), dek = Ã K,
    // dp_row = P̃ K, da_col = Ãᵀ (b ⊙ K), dp_col = P̃ᵀ Q (with GateKind::beta, β_m goes with Ã's
    // row m, so that every right operand is a token row as it is).
    const auto decayed = [&](const float* M, int i, int j) { return j < i ? M[i * kPitch + j] * e_of(i, j, 0) : 0.0f; };
    block_gemm(
        L, K, L, [&](int i, int j) { return decayed(dA, i, j); }, key_rows,
        [&](int i, int d, float s) { gws.dW[c.key(i, d)] = s; }, tiles);
    block_gemm(
        L, K, L, [&](int i, int j) { return decayed(dP, i, j); }, key_rows,
        [&](int i, int d, float s) { gws.dG[c.key(i, d)] = s; }, tiles);
    if constexpr (kGate == ops::GateKind::beta) {
      block_gemm<gemm::a_m_fast>(
          L, K, L, [&](int i, int m) { return decayed(dA, m, i) * c.erase(m, 0); }, key_rows,
          [&](int i, int d, float s) { gws.r[c.key(i, d)] = s; }, tiles);
    } else {
      block_gemm<gemm::a_m_fast>(
          L, K, L, [&](int i, int m) { return decayed(dA, m, i); }, erase_key_row,
          [&](int i, int d, float s) { gws.r[c.key(i, d)] = s; }, tiles);
    }
    block_gemm<gemm::a_m_fast>(
        L, K, L, [&](int i, int m) { return decayed(dP, m, i); }, query_rows,
        [&](int i, int d, float s) { gws.db[c.key(i, d)] = s; }, tiles);
  } else {
    // Per channel, by sub-chunks of kSubChunk rows: for a pair in different sub-chunks, with n the
    // first row of the later one, e_ijd = exp(G_id − G_nd) · exp(G_nd − G_jd) (both exponents ≤ 0),
    // so the pairs across sub-chunks are products of rescaled rows; step 4 adds the pairs inside
    // a sub-chunk. Row sums: rows i ∈ [n, n + 16) over j < n. Column sums: rows i < n over
    // m ∈ [n, n + 16), one product per n, added up.
    for (int p = threadIdx.x; p < L * K; p += blockDim.x) {
      const int i = p / K, d = p % K;
      gws.r[c.key(i, d)] = gws.db[c.key(i, d)] = 0.0f;
      if (i < kSubChunk) gws.dW[c.key(i, d)] = gws.dG[c.key(i, d)] = 0.0f;
    }
    __syncthreads();
    for (int n = kSubChunk; n < L; n += kSubChunk) {
      const int rows = min(kSubChunk, L - n);
      const auto to_ref = [&](int j, int d) { return c.k(j, d) * c.between(n, j, d); };
      block_gemm(
          rows, K, n, [&](int i, int j) { return dA[(n + i) * kPitch + j]; }, to_ref,
          [&](int i, int d, float s) { gws.dW[c.key(n + i, d)] = s * c.between(n + i, n, d); }, tiles);
      block_gemm(
          rows, K, n, [&](int i, int j) { return dP[(n + i) * kPitch + j]; }, to_ref,
          [&](int i, int d, float s) { gws.dG[c.key(n + i, d)] = s * c.between(n + i, n, d); }, tiles);
      const auto from_ref = [&](auto row) {
        return [&, row](int m, int d) { return row(n + m, d) * c.between(n + m, n, d); };
      };
      const auto query_row = [&](int m, int d) { return c.q(m, d); };
      block_gemm<gemm::a_m_fast>(
          n, K, rows, [&](int i, int m) { return dA[(n + m) * kPitch + i]; }, from_ref(erase_key_row),
          [&](int i, int d, float s) { gws.r[c.key(i, d)] += s * c.between(n, i, d); }, tiles);
      block_gemm<gemm::a_m_fast>(
          n, K, rows, [&](int i, int m) { return dP[(n + m) * kPitch + i]; }, from_ref(query_row),
          [&](int i, int d, float s) { gws.db[c.key(i, d)] += s * c.between(n, i, d); }, tiles);
    }
  }
  __syncthreads();

  // 4. (each thread computes two of its entries before storing them: one load latency per pair)
  struct KeyGradients {
    float dq, dk, db, dG, r;
  };
  for_each_batched<2>(
      L * K,
      [&](int p) {
        const int i = p / K, d = p % K;
        const float q = c.q(i, d), k = c.k(i, d), b = c.erase(i, d), gamma = c.gamma(i, d), to_end = c.to_end(i, d);
        const float dq_decayed = gws.dQd[c.key(i, d)], dk_to_end = gws.dKe[c.key(i, d)];
        const float dY = gws.dY[c.key(i, d)];
        float dek = gws.dW[c.key(i, d)], dp_row = gws.dG[c.key(i, d)];
        float da_col = gws.r[c.key(i, d)], dp_col = gws.db[c.key(i, d)];
        if constexpr (kDecay == ops::DecayKind::channel) {
          const int n = i - i % kSubChunk;
          for (int j = n; j < i; ++j) {
            const float kf = c.k(j, d) * e_of(i, j, d);
            dek += dA[i * kPitch + j] * kf;
            dp_row += dP[i * kPitch + j] * kf;
          }
          for (int m = i + 1; m < min(n + kSubChunk, L); ++m) {
            const float f = e_of(m, i, d);
            da_col += dA[m * kPitch + i] * c.erase(m, d) * c.k(m, d) * f;
            dp_col += dP[m * kPitch + i] * c.q(m, d) * f;
          }
        }
        const float diagonal = dP[i * kPitch + i];
        KeyGradients g{};
        g.dq = dq_decayed * gamma + dp_row + diagonal * k;
        g.dk = dk_to_end * to_end + gamma * b * dY + b * dek + da_col + dp_col + diagonal * q;
        g.db = gamma * k * dY + k * dek;
        if constexpr (kDecay != ops::DecayKind::none) {
          g.dG = dq_decayed * q * gamma + dY * b * k * gamma + b * k * dek - k * da_col + q * dp_row - k * dp_col;
          if (i == L - 1) {
            float state_dot = 0.0f;
            for (int e = 0; e < V; ++e) state_dot += S0[d * V + e] * dS[d * V + e];
            g.dG += gamma * state_dot;
          }
          g.r = dk_to_end * k * to_end;
        }
        return g;
      },
      [&](int p, const KeyGradients& g) {
        const int64_t at = c.key(p / K, p % K);
        out.dq[at] = g.dq;
        out.dk[at] = g.dk;
        if constexpr (kGate == ops::GateKind::erase_write) {
          out.db[at] = g.db;
        } else {
          gws.db[at] = g.db;
        }
        if constexpr (kDecay != ops::DecayKind::none) {
          gws.dG[at] = g.dG;
          gws.r[at] = g.r;
        }
      });

  // 5. (dX is read and replaced by dX ⊙ v, the write gate's term, by the same thread)
  for_each_batched<4>(
      L * V,
      [&](int p) {
        const int i = p / V, e = p % V;
        return float3{gws.dX[c.value(i, e)], c.write(i, e), c.v(i, e)};
      },
      [&](int p, float3 dX_w_v) {
        const int64_t at = c.value(p / V, p % V);
        out.dv[at] = dX_w_v.x * dX_w_v.y;
        const float dw = dX_w_v.x * dX_w_v.z;
        if constexpr (kGate == ops::GateKind::erase_write) {
          out.dw[at] = dw;
        } else {
          gws.dX[at] = dw;
        }
      });
  __syncthreads();

  // 6.
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize, warps = blockDim.x / kWarpSize;
  if constexpr (kGate == ops::GateKind::beta) {
    for (int i = warp; i < L; i += warps) {
      float s = 0.0f;
      for (int d = lane; d < K; d += kWarpSize) s += gws.db[c.key(i, d)];
      for (int e = lane; e < V; e += kWarpSize) s += gws.dX[c.value(i, e)];
      s = warp_sum(s);
      if (lane == 0) out.dbeta[c.row(i)] = s;
    }
  }
  if constexpr (kDecay == ops::DecayKind::channel) {
    for (int d = threadIdx.x; d < K; d += blockDim.x) {
      float before = 0.0f;  // Σ_{s<i} r_s, replacing r_i
      for_rows_batched(
          L, [&](int i) { return gws.r[c.key(i, d)]; },
          [&](int i, float r) {
            gws.r[c.key(i, d)] = before;
            before += r;
          });
      float after = 0.0f;  // Σ_{s≥i} dG_s
      for_rows_batched<true>(
          L,
          [&](int i) {
            return float2{gws.dG[c.key(i, d)], gws.r[c.key(i, d)]};
          },
          [&](int i, float2 dG_before) {
            after += dG_before.x;
            out.dg[c.key(i, d)] = after + dG_before.y;
          });
    }
  } else if constexpr (kDecay == ops::DecayKind::scalar) {
    // The sums over the channels first (a warp per row), then down the rows (one thread):
    // dg_i = Σ_{s≥i} Σ_d dG_sd + Σ_{s<i} Σ_d r_sd.
    __shared__ float dG_rows[kChunk], r_rows[kChunk];
    for (int i = warp; i < L; i += warps) {
      float dG = 0.0f, r = 0.0f;
      for (int d = lane; d < K; d += kWarpSize) {
        dG += gws.dG[c.key(i, d)];
        r += gws.r[c.key(i, d)];
      }
      dG = warp_sum(dG);
      r = warp_sum(r);
      if (lane == 0) {
        dG_rows[i] = dG;
        r_rows[i] = r;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      float before = 0.0f;  // Σ_{s<i} r_s, replacing r_i
      for (int i = 0; i < L; ++i) {
        const float r = r_rows[i];
        r_rows[i] = before;
        before += r;
      }
      float after = 0.0f;  // Σ_{s≥i} dG_s
      for (int i = L - 1; i >= 0; --i) {
        after += dG_rows[i];
        out.dg[c.row(i)] = after + r_rows[i];
      }
    }
  }
}

}  // namespace

void chunk_gradients(const Call& call, const Workspace& ws, const void* d_o, const GradWorkspace& gws,
                     const GradientOutputs& out) {
  if (call.chunks.count == 0) return;
  dispatch_kinds(call, [&](auto decay, auto gate) {
    const auto kernel = chunk_gradients_kernel<decltype(decay)::value, decltype(gate)::value>;
    allow_shared_memory(reinterpret_cast<const void*>(kernel), kGradientSharedBytes);
    const Outputs typed{static_cast<float*>(out.dq),
                        static_cast<float*>(out.dk),
                        static_cast<float*>(out.dv),
                        static_cast<float*>(out.dbeta),
                        static_cast<float*>(out.db),
                        static_cast<float*>(out.dw),
                        out.dg};
    kernel<<<chunk_grid(call), kThreads, kGradientSharedBytes>>>(operands(call), call.chunks, ws,
                                                                 static_cast<const float*>(d_o), gws, typed);
    check_launch("delta_rule chunk_gradients_kernel");
  });
}

}  // namespace linea::cuda::delta
