// The chunk-parallel products with P (one block per chunk and head, through block_gemm):
//   output:        O_ie  = Σ_d Qg_id S0_de + scale · Σ_{j≤i} P_ij Ũ_je     (Qg = scale · Q ⊙ γ)
//   written_local: dŨ_ie = scale · Σ_{j≥i} P_ji dO_je                      (∂L/∂Ũ through O alone)
#include "kernels/chunk/cuda/block_gemm.cuh"
#include "kernels/cuda/check.h"
#include "model/mixers/delta_rule/cuda/delta_rule_chunk.cuh"

namespace linea::cuda::delta {

namespace {

template <ops::DecayKind kDecay, ops::GateKind kGate>
__global__ void __launch_bounds__(kThreads, 3) output_kernel(Operands x, Chunks chunks, Workspace ws, float* o) {
  const int64_t chunk = blockIdx.x;
  const int head = blockIdx.y;
  const int K = x.key_dim, V = x.value_dim;
  const ChunkRef<kDecay, kGate> c(x, chunks, ws.G, chunk, head);
  const float* S0 = ws.S + (chunk * x.heads + head) * K * V;
  const float* P = ws.P + (chunk * x.heads + head) * kChunk * kChunk;
  __shared__ BlockGemmTiles tiles;
  // Qg S0 + (scale · P) Ũ, one sum.
  const int64_t key_stride = int64_t{x.heads} * K, value_stride = int64_t{x.heads} * V;
  block_gemm_sum(
      c.len, V, [&](int i, int e, float s) { o[c.value(i, e)] = s; }, tiles,
      gemm_term(K, Strided<float>{ws.Qg + c.key(0, 0), key_stride}, Strided<float>{S0, V}),
      gemm_term(c.len, Strided<float>{P, kChunk, x.scale}, Strided<float>{ws.Ut + c.value(0, 0), value_stride}));
}

template <ops::DecayKind kDecay, ops::GateKind kGate>
__global__ void __launch_bounds__(kThreads)
    written_local_kernel(Operands x, Chunks chunks, Workspace ws, const float* d_o, GradWorkspace gws) {
  const int64_t chunk = blockIdx.x;
  const int head = blockIdx.y;
  const int V = x.value_dim;
  const ChunkRef<kDecay, kGate> c(x, chunks, ws.G, chunk, head);
  const float* P = ws.P + (chunk * x.heads + head) * kChunk * kChunk;
  __shared__ BlockGemmTiles tiles;
  block_gemm<gemm::a_m_fast>(
      c.len, V, c.len, Strided<float>{P, kChunk}, Strided<float>{d_o + c.value(0, 0), int64_t{x.heads} * V},
      [&](int i, int e, float s) { gws.dUt[c.value(i, e)] = x.scale * s; }, tiles);
}

}  // namespace

void output(const Call& call, const Workspace& ws, void* o) {
  if (call.chunks.count == 0) return;
  dispatch_kinds(call, [&](auto decay, auto gate) {
    output_kernel<decltype(decay)::value, decltype(gate)::value>
        <<<chunk_grid(call), kThreads>>>(operands(call), call.chunks, ws, static_cast<float*>(o));
    check_launch("delta_rule output_kernel");
  });
}

void written_local(const Call& call, const Workspace& ws, const void* d_o, const GradWorkspace& gws) {
  if (call.chunks.count == 0) return;
  dispatch_kinds(call, [&](auto decay, auto gate) {
    written_local_kernel<decltype(decay)::value, decltype(gate)::value>
        <<<chunk_grid(call), kThreads>>>(operands(call), call.chunks, ws, static_cast<const float*>(d_o), gws);
    check_launch("delta_rule written_local_kernel");
  });
}

}  // namespace linea::cuda::delta
