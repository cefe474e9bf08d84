// The input gradients of the CUDA gated-linear-attention family, per (chunk, head), from the state
// entering the chunk (S0 = ws.h), ∂L/∂ the state at its end (dS = ws.dh), P and dP = scale dO Vᵀ
// (model/mixers/gla/cuda/gla_kernels.cuh has the notation). Each line below differentiates one
// line of the forward:
//
//   dV_j  = scale Σ_{i ≥ j} P_ij dO_i + Σ_d Kd_jd dS_d            (Kd = K ⊙ exp(G_{L−1} − G))
//   with dQd = scale dO S0ᵀ, dKd = V dSᵀ and the Gram's parts
//        dqg_id = Σ_{j ≤ i} dP_ij k_jd exp(R_id − G_jd),  dkg_id = Σ_{m ≥ i} dP_mi q_md exp(R_md − G_id)
//        (j < i and m > i for the bonus readout):
//   dq_i  = dQd_i ⊙ exp(R_i) + dqg_i  [+ dP_ii u ⊙ k_i]
//   dk_i  = dKd_i ⊙ exp(G_{L−1} − G_i) + dkg_i  [+ dP_ii u ⊙ q_i]
//   du    = Σ_i dP_ii q_i ⊙ k_i
//   ∂L/∂G: at row i − shift (R_i = G_{i−shift}): dQd_i ⊙ q_i ⊙ exp(R_i) + q_i ⊙ dqg_i;
//          at row i: − k_i ⊙ dkg_i − Kd_i ⊙ dKd_i;  at row L − 1: Σ_i Kd_i ⊙ dKd_i
//          + exp(G_{L−1}) ⊙ Σ_e S0_·e dS_·e
//          (the pairs of decay 1, j = i − shift, and the last row's Kd ⊙ dKd add and remove the
//          same amount: they are left out, as rounding residue of exact cancellation)
//   dg_t  = Σ_{s ≥ t} ∂L/∂G_s (G is a cumulative sum); a tied key k = 1 − exp(g) adds − exp(g_t) ⊙ dk_t
//           and has no dk; a scalar decay sums dg over the channels; a fixed one has none.
#include "kernels/cuda/check.h"
#include "model/mixers/gla/cuda/gla_kernels.cuh"

namespace linea::cuda::gla {

namespace {

using Rows = float[kPitch];  // the rows of a staged [·][kTile] tile

// Kd_jd = k_jd exp(G_{L−1,d} − G_jd) for the chunk's rows j < L (else 0) and channels d0 + dd < K.
template <class T>
__device__ void load_keys_to_end(const Call& c, const double* G, const Span& s, int h, int d0, Rows* Kd) {
  for (int p = threadIdx.x; p < kC * kTile; p += kThreads) {
    const int j = p / kTile, dd = p % kTile, d = d0 + dd;
    Kd[j][dd] = j < s.len && d < c.key_dim
                    ? key<T>(c, s.first + j, h, d) *
                          decay_between(cumulated(c, G, s, h, s.len - 1, d), cumulated(c, G, s, h, j, d))
                    : 0.0f;
  }
}

// tile[dd][ee] = stack[(chunk, h), d0 + dd, e0 + ee] of an [NC, H, K, V] f32 stack (0 outside).
__device__ void load_state_tile(const Call& c, const float* stack, int64_t chunk, int h, int d0, int e0, Rows* tile) {
  for (int p = threadIdx.x; p < kTile * kTile; p += kThreads) {
    const int dd = p / kTile, ee = p % kTile, d = d0 + dd, e = e0 + ee;
    tile[dd][ee] = d < c.key_dim && e < c.value_dim ? stack[state_index(c, chunk, h, d, e)] : 0.0f;
  }
}

// Thread (r, e) computes dV of rows j = r, r + 8, … and column e0 + e.
template <class T>
__global__ void __launch_bounds__(kThreads) value_gradient_kernel(Call c, Workspace ws, const T* d_o, T* dv) {
  __shared__ float P[kC * kC], dOt[kC * kColumns];
  __shared__ Rows Kd[kC], dS[kTile];
  const int64_t chunk = blockIdx.x;
  const int h = blockIdx.y, e0 = blockIdx.z * kColumns;
  const int e = threadIdx.x % kColumns, r = threadIdx.x / kColumns;
  const Span s = chunk_span(c, chunk);
  const float* from = ws.P + (chunk * c.heads + h) * kC * kC;
  for (int p = threadIdx.x; p < kC * kC; p += kThreads) P[p] = from[p];
  load_column_tile<T>(c, d_o, s, h, e0, dOt);
  __syncthreads();
  float acc[kC / kRowGroups];
#pragma unroll
  for (int m = 0; m < kC / kRowGroups; ++m) {
    const int j = r + kRowGroups * m;
    float sum = 0.0f;
    for (int i = j; i < s.len; ++i) sum += P[i * kC + j] * dOt[i * kColumns + e];
    acc[m] = c.scale * sum;
  }
  for (int d0 = 0; d0 < c.key_dim; d0 += kTile) {
    __syncthreads();
    load_keys_to_end<T>(c, ws.G, s, h, d0, Kd);
    load_state_tile(c, ws.dh, chunk, h, d0, e0, dS);
    __syncthreads();
#pragma unroll
    for (int m = 0; m < kC / kRowGroups; ++m) {
      const int j = r + kRowGroups * m;
      for (int dd = 0; dd < kTile; ++dd) acc[m] += Kd[j][dd] * dS[dd][e];
    }
  }
  if (e0 + e >= c.value_dim) return;
#pragma unroll
  for (int m = 0; m < kC / kRowGroups; ++m) {
    const int j = r + kRowGroups * m;
    if (j < s.len) dv[row_index(c, s.first + j, h) * c.value_dim + e0 + e] = from_float<T>(acc[m]);
  }
}

// The key side, per (chunk, head), by tiles of 32 channels: thread (r, dd) owns channel d0 + dd of
// rows i = r, r + 8, …; warp 0 then scans ∂L/∂G down the rows (one column a thread).
// Shared memory: per tile R, G [64][33] f64; f32: dP [64][64]; per tile q, k, the ∂L/∂G parts A
// (readout), B (Gram key side, then the scanned dg), X (Kd ⊙ dKd), U (du), the dO and V tiles
// [64][33]; S0, dS tiles [32][33]; the partial state dots [8][32]; the scalar decay's row sums [64].
using WideRows = double[kPitch];
constexpr size_t kKeyGradientBytes =
    2 * sizeof(double) * kC * kPitch +
    sizeof(float) * (kC * kC + 8 * kC * kPitch + 2 * kTile * kPitch + kRowGroups * kTile + kC);

template <class T>
__global__ void __launch_bounds__(kThreads) key_gradients_kernel(Call c, Workspace ws, const T* d_o, Outputs out) {
  extern __shared__ double wide_smem[];
  WideRows* R = reinterpret_cast<WideRows*>(wide_smem);
  WideRows* Gt = R + kC;
  float* dP = reinterpret_cast<float*>(Gt + kC);
  Rows* q = reinterpret_cast<Rows*>(dP + kC * kC);
  Rows* k = q + kC;
  Rows* A = k + kC;
  Rows* B = A + kC;
  Rows* X = B + kC;
  Rows* U = X + kC;
  Rows* dOt = U + kC;
  Rows* Vt = dOt + kC;
  Rows* S0 = Vt + kC;
  Rows* dS = S0 + kTile;
  float* partial = reinterpret_cast<float*>(dS + kTile);
  float* row_sum = partial + kRowGroups * kTile;

  const int64_t chunk = blockIdx.x;
  const int h = blockIdx.y;
  const Span s = chunk_span(c, chunk);
  const int L = s.len, K = c.key_dim, V = c.value_dim, shift = c.bonus ? 1 : 0;
  const int dd = threadIdx.x % kTile, r = threadIdx.x / kTile;
  constexpr int kRows = kC / kRowGroups;
  const float* dP_from = ws.dP + (chunk * c.heads + h) * kC * kC;
  for (int p = threadIdx.x; p < kC * kC; p += kThreads) dP[p] = dP_from[p];
  for (int i = threadIdx.x; i < kC; i += kThreads) row_sum[i] = 0.0f;

  for (int d0 = 0; d0 < K; d0 += kTile) {
    const int d = d0 + dd;
    __syncthreads();  // the previous tile is no longer read
    for (int p = threadIdx.x; p < kC * kTile; p += kThreads) {
      const int i = p / kTile, cc = p % kTile, dc = d0 + cc;
      const bool inside = i < L && dc < K;
      const int64_t t = s.first + i;
      q[i][cc] = inside ? query<T>(c, t, h, dc) : 0.0f;
      k[i][cc] = inside ? key<T>(c, t, h, dc) : 0.0f;
      R[i][cc] = inside ? readout_decay(c, ws.G, s, h, i, dc) : 0.0;
      Gt[i][cc] = inside ? cumulated(c, ws.G, s, h, i, dc) : 0.0;
    }
    // dQd (before the scale) and dKd of the thread's rows, and its part of Σ_e S0_de dS_de.
    float dqd[kRows] = {}, dkd[kRows] = {}, state_dot = 0.0f;
    for (int e0 = 0; e0 < V; e0 += kTile) {
      __syncthreads();
      for (int p = threadIdx.x; p < kC * kTile; p += kThreads) {
        const int i = p / kTile, ee = p % kTile, e = e0 + ee;
        const bool inside = i < L && e < V;
        const int64_t at = row_index(c, s.first + i, h) * V + e;
        dOt[i][ee] = inside ? token_value<T>(d_o, at) : 0.0f;
        Vt[i][ee] = inside ? token_value<T>(c.v, at) : 0.0f;
      }
      load_state_tile(c, ws.h, chunk, h, d0, e0, S0);
      load_state_tile(c, ws.dh, chunk, h, d0, e0, dS);
      __syncthreads();
#pragma unroll
      for (int m = 0; m < kRows; ++m) {
        const int i = r + kRowGroups * m;
        for (int ee = 0; ee < kTile; ++ee) {
          dqd[m] += dOt[i][ee] * S0[dd][ee];
          dkd[m] += Vt[i][ee] * dS[dd][ee];
        }
      }
      for (int ee = r; ee < kTile; ee += kRowGroups) state_dot += S0[dd][ee] * dS[dd][ee];
    }
    partial[r * kTile + dd] = state_dot;

    float dk_kept[kRows];
#pragma unroll
    for (int m = 0; m < kRows; ++m) {
      const int i = r + kRowGroups * m;
      float a = 0.0f, b = 0.0f, x = 0.0f, du = 0.0f, dk = 0.0f;
      if (i < L && d < K) {
        const float qi = q[i][dd], ki = k[i][dd];
        const double Ri = R[i][dd], Gi = Gt[i][dd];
        // The pairs of decay 1 (j = i − shift) add and remove the same amount of ∂L/∂G: left out of
        // it (dqg_far, dkg_far), they leave no rounding residue, which under strong decay would
        // exceed dg itself.
        float dqg_far = 0.0f, dkg_far = 0.0f;
        for (int j = 0; j < i - shift; ++j) dqg_far += dP[i * kC + j] * k[j][dd] * decay_between(Ri, Gt[j][dd]);
        for (int n = i + shift + 1; n < L; ++n) dkg_far += dP[n * kC + i] * q[n][dd] * decay_between(R[n][dd], Gi);
        const float dqg = i >= shift ? dqg_far + dP[i * kC + i - shift] * k[i - shift][dd] : 0.0f;
        const float dkg = i + shift < L ? dkg_far + dP[(i + shift) * kC + i] * q[i + shift][dd] : 0.0f;
        const float to_readout = decay_between(Ri, 0.0), to_end = decay_between(Gt[L - 1][dd], Gi);
        const float dq_decayed = c.scale * dqd[m];
        float dq = dq_decayed * to_readout + dqg;
        dk = dkd[m] * to_end + dkg;
        if (c.bonus) {
          const float p = dP[i * kC + i], ud = c.u[h * K + d];
          dq += p * ud * ki;
          dk += p * ud * qi;
          du = p * qi * ki;
        }
        a = dq_decayed * qi * to_readout + qi * dqg_far;
        b = -ki * dkg_far;
        x = i < L - 1 ? ki * to_end * dkd[m] : 0.0f;  // the last row's −x and +x cancel exactly
        const int64_t at = row_index(c, s.first + i, h) * K + d;
        static_cast<T*>(out.dq)[at] = from_float<T>(dq);
        if (!c.tied) static_cast<T*>(out.dk)[at] = from_float<T>(dk);
      }
      dk_kept[m] = dk;
      A[i][dd] = a;
      B[i][dd] = b;
      X[i][dd] = x;
      U[i][dd] = du;
    }
    __syncthreads();
    if (r == 0) {  // warp 0: column dd's ∂L/∂G, scanned from the chunk's end
      float state_total = 0.0f, x_total = 0.0f, du_total = 0.0f;
      for (int g = 0; g < kRowGroups; ++g) state_total += partial[g * kTile + dd];
      for (int i = 0; i < L; ++i) {
        x_total += X[i][dd];
        du_total += U[i][dd];
      }
      float run = 0.0f;
      for (int i = L - 1; i >= 0; --i) {
        float dG = (i + shift < L ? A[i + shift][dd] : 0.0f) + B[i][dd] - X[i][dd];
        if (i == L - 1) dG += x_total + decay_between(Gt[L - 1][dd], 0.0) * state_total;
        run += dG;
        B[i][dd] = run;
      }
      if (c.bonus && d < K) ws.du_parts[(chunk * c.heads + h) * K + d] = du_total;
    }
    __syncthreads();
    if (c.decay == ops::GlaDecay::channel) {
#pragma unroll
      for (int m = 0; m < kRows; ++m) {
        const int i = r + kRowGroups * m;
        if (i < L && d < K) {
          const int64_t at = row_index(c, s.first + i, h) * K + d;
          out.dg[at] = B[i][dd] - (c.tied ? expf(c.g[at]) * dk_kept[m] : 0.0f);
        }
      }
    } else if (c.decay == ops::GlaDecay::scalar) {
      for (int i = threadIdx.x; i < L; i += kThreads) {
        float sum = row_sum[i];
        for (int cc = 0; cc < kTile && d0 + cc < K; ++cc) sum += B[i][cc];
        row_sum[i] = sum;
      }
    }
  }
  if (c.decay == ops::GlaDecay::scalar) {
    __syncthreads();
    for (int i = threadIdx.x; i < L; i += kThreads) out.dg[row_index(c, s.first + i, h)] = row_sum[i];
  }
}

// du[h, d] = Σ over the chunks (in order) of du_parts[chunk, h, d].
__global__ void bonus_gradient_kernel(Call c, const float* parts, float* du) {
  const int64_t n = static_cast<int64_t>(c.heads) * c.key_dim;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int64_t chunk = 0; chunk < c.chunks.count; ++chunk) sum += parts[chunk * n + i];
    du[i] = sum;
  }
}

template <class T>
void launch_value_gradient(const Call& c, const Workspace& ws, const void* d_o, void* dv) {
  const dim3 grid(static_cast<unsigned>(c.chunks.count), static_cast<unsigned>(c.heads),
                  static_cast<unsigned>((c.value_dim + kColumns - 1) / kColumns));
  value_gradient_kernel<T><<<grid, kThreads>>>(c, ws, static_cast<const T*>(d_o), static_cast<T*>(dv));
  check_launch("gla value_gradient");
}

template <class T>
void launch_key_gradients(const Call& c, const Workspace& ws, const void* d_o, const Outputs& out) {
  const size_t bytes = kKeyGradientBytes;
  delta::allow_shared_memory(reinterpret_cast<const void*>(&key_gradients_kernel<T>), bytes);
  const dim3 grid(static_cast<unsigned>(c.chunks.count), static_cast<unsigned>(c.heads));
  key_gradients_kernel<T><<<grid, kThreads, bytes>>>(c, ws, static_cast<const T*>(d_o), out);
  check_launch("gla key_gradients");
}

}  // namespace

void value_gradient(const Call& c, const Workspace& ws, const void* d_o, void* dv) {
  if (c.chunks.count == 0) return;
  if (c.bf16) return launch_value_gradient<__nv_bfloat16>(c, ws, d_o, dv);
  launch_value_gradient<float>(c, ws, d_o, dv);
}

void key_gradients(const Call& c, const Workspace& ws, const void* d_o, const Outputs& out) {
  if (c.chunks.count == 0) return;
  if (c.bf16) return launch_key_gradients<__nv_bfloat16>(c, ws, d_o, out);
  launch_key_gradients<float>(c, ws, d_o, out);
}

void bonus_gradient(const Call& c, const Workspace& ws, float* du) {
  const int64_t n = static_cast<int64_t>(c.heads) * c.key_dim;
  bonus_gradient_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads>>>(c, ws.du_parts, du);
  check_launch("gla bonus_gradient");
}

}  // namespace linea::cuda::gla
