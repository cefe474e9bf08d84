// HGRN's chunked scan on CUDA (model/mixers/hgrn/cuda/hgrn.h). One thread per (chunk, channel) or
// (sequence, channel); neighbouring threads take neighbouring channels (coalesced). With a_t =
// exp(g_t) and the chunk's decay product A = exp(Σ_chunk g) (one exp of a sum ≤ 0):
//
//   forward   local:  E = the chunk's scan h_t = a_t h_{t−1} + x_t entered with 0 (its last value)
//             carry:  C_0 = h0, C_{n+1} = A_n C_n + E_n (chunks of one sequence in order); ht
//             apply:  o_t = h_t, the scan entered with C_n
//   backward  δ_t = ∂L/∂h_t = do_t + a_{t+1} δ_{t+1}, from the sequence's end with dht:
//             local:  F = a_first δ'_first, δ' the chunk's reverse scan entered with 0
//             carry:  D_last = dht, D_{n−1} = A_n D_n + F_n (in reverse); dh0 = A_0 D_0 + F_0
//             apply:  δ from D_n down the chunk: dx_t = δ_t, dg_t = δ_t a_t h_{t−1}, with h
//                     recomputed from C_n (the forward's carries, run again)
#include <cstdint>
#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/cuda/element_types.cuh"
#include "kernels/cuda/scratch.h"
#include "model/mixers/delta_rule/cuda/delta_rule_chunk.cuh"
#include "model/mixers/hgrn/cuda/hgrn.h"

namespace linea::cuda {

namespace {

constexpr int kThreads = 256;

struct Scan {
  delta::Chunks chunks;
  int64_t channels;
  const float* g;
  float *A, *E, *C, *F, *D;  // [NC, D]
};

struct Span {
  int64_t first, end;
};
__device__ __forceinline__ Span span(const Scan& s, int64_t chunk) {
  return {s.chunks.first[chunk], s.chunks.end[chunk]};
}

// The thread's channel (grid.x × 256 threads cover the channels); false past the last.
__device__ __forceinline__ bool channel_of(const Scan& s, int64_t& c) {
  c = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  return c < s.channels;
}

template <class T>
__global__ void forward_local_kernel(Scan s, const T* x) {
  int64_t c;
  if (!channel_of(s, c)) return;
  const int64_t chunk = blockIdx.y, D = s.channels;
  const Span sp = span(s, chunk);
  float h = 0.0f, log_product = 0.0f;
  for (int64_t t = sp.first; t < sp.end; ++t) {
    h = expf(s.g[t * D + c]) * h + to_float(x[t * D + c]);
    log_product += s.g[t * D + c];
  }
  s.A[chunk * D + c] = expf(log_product);
  s.E[chunk * D + c] = h;
}

// forward: C_n (the carry entering chunk n) and ht; reverse: D_n (∂L/∂ the chunk's last state) and dh0.
__global__ void carry_kernel(Scan s, bool reverse, const float* start, float* finish) {
  int64_t c;
  if (!channel_of(s, c)) return;
  const int64_t seq = blockIdx.y, D = s.channels;
  const int64_t begin = s.chunks.seq_chunk[seq], end = s.chunks.seq_chunk[seq + 1];
  float carry = start ? start[seq * D + c] : 0.0f;
  for (int64_t i = 0; i < end - begin; ++i) {
    const int64_t chunk = reverse ? end - 1 - i : begin + i;
    if (reverse) {
      s.D[chunk * D + c] = carry;
      carry = s.A[chunk * D + c] * carry + s.F[chunk * D + c];
    } else {
      s.C[chunk * D + c] = carry;
      carry = s.A[chunk * D + c] * carry + s.E[chunk * D + c];
    }
  }
  if (finish) finish[seq * D + c] = carry;
}

template <class T>
__global__ void forward_apply_kernel(Scan s, const T* x, T* o) {
  int64_t c;
  if (!channel_of(s, c)) return;
  const int64_t chunk = blockIdx.y, D = s.channels;
  const Span sp = span(s, chunk);
  float h = s.C[chunk * D + c];
  for (int64_t t = sp.first; t < sp.end; ++t) {
    h = expf(s.g[t * D + c]) * h + to_float(x[t * D + c]);
    o[t * D + c] = from_float<T>(h);
  }
}

template <class T>
__global__ void backward_local_kernel(Scan s, const T* d_o) {
  int64_t c;
  if (!channel_of(s, c)) return;
  const int64_t chunk = blockIdx.y, D = s.channels;
  const Span sp = span(s, chunk);
  float carry = 0.0f;  // a_{t+1} δ'_{t+1}
  for (int64_t t = sp.end - 1; t >= sp.first; --t) carry = expf(s.g[t * D + c]) * (to_float(d_o[t * D + c]) + carry);
  s.F[chunk * D + c] = carry;
}

template <class T>
__global__ void backward_apply_kernel(Scan s, const T* x, const T* d_o, T* dx, float* dg) {
  constexpr int kChunk = delta::kChunk;
  int64_t c;
  if (!channel_of(s, c)) return;
  const int64_t chunk = blockIdx.y, D = s.channels;
  const Span sp = span(s, chunk);
  const int len = static_cast<int>(sp.end - sp.first);
  float h_prev[kChunk];  // h_{t−1} of the chunk's tokens
  float h = s.C[chunk * D + c];
  for (int i = 0; i < len; ++i) {
    const int64_t t = sp.first + i;
    h_prev[i] = h;
    h = expf(s.g[t * D + c]) * h + to_float(x[t * D + c]);
  }
  float carry = s.D[chunk * D + c];
  for (int i = len - 1; i >= 0; --i) {
    const int64_t t = sp.first + i;
    const float a = expf(s.g[t * D + c]), delta_t = to_float(d_o[t * D + c]) + carry;
    dx[t * D + c] = from_float<T>(delta_t);
    dg[t * D + c] = delta_t * a * h_prev[i];
    carry = a * delta_t;
  }
}

// The scan's chunk table and carries (one scratch request); backward adds F and D.
struct HgrnPlan {
  Scan scan{};
  dim3 chunk_grid, seq_grid;

  HgrnPlan(const SeqLayout& seqs, const ops::HgrnInputs& in, bool backward) {
    const std::vector<int64_t> table = delta::chunk_table(seqs);
    const int64_t chunks = (static_cast<int64_t>(table.size()) - seqs.num_seqs() - 1) / 2;
    scan.channels = in.x.dim(1);
    const size_t carries = static_cast<size_t>(chunks * scan.channels) * sizeof(float);
    std::vector<size_t> sizes = {table.size() * sizeof(int64_t), carries, carries, carries};
    if (backward) sizes.insert(sizes.end(), {carries, carries});
    const std::vector<void*> p = scratch(sizes);
    scan.chunks = delta::place_chunk_table(table, seqs.num_seqs(), p[0]);
    scan.g = static_cast<const float*>(in.g.raw());
    const auto at = [&](size_t i) { return i < p.size() ? static_cast<float*>(p[i]) : nullptr; };
    scan.A = at(1), scan.E = at(2), scan.C = at(3), scan.F = at(4), scan.D = at(5);
    const auto blocks = static_cast<unsigned>((scan.channels + kThreads - 1) / kThreads);
    chunk_grid = dim3(blocks, static_cast<unsigned>(chunks));
    seq_grid = dim3(blocks, static_cast<unsigned>(seqs.num_seqs()));
  }
};

const float* f32_or_null(const Tensor& t) { return t.defined() ? static_cast<const float*>(t.raw()) : nullptr; }
float* f32_or_null(Tensor& t) { return t.defined() ? static_cast<float*>(t.raw()) : nullptr; }

// The forward's carries C (and ht when given; sequences without tokens pass h0 on).
template <class T>
void forward_carries(const HgrnPlan& plan, const ops::HgrnInputs& in, float* ht) {
  if (plan.chunk_grid.y > 0) {
    forward_local_kernel<T><<<plan.chunk_grid, kThreads>>>(plan.scan, static_cast<const T*>(in.x.raw()));
    check_launch("hgrn forward_local");
  }
  carry_kernel<<<plan.seq_grid, kThreads>>>(plan.scan, false, f32_or_null(in.h0), ht);
  check_launch("hgrn carry");
}

}  // namespace

void hgrn_forward(const SeqLayout& seqs, const ops::HgrnInputs& in, Tensor o, Tensor ht) {
  const HgrnPlan plan(seqs, in, false);
  if (plan.scan.channels == 0 || seqs.num_seqs() == 0) return;
  dispatch_float(in.x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    forward_carries<T>(plan, in, f32_or_null(ht));
    if (plan.chunk_grid.y == 0) return;
    forward_apply_kernel<T>
        <<<plan.chunk_grid, kThreads>>>(plan.scan, static_cast<const T*>(in.x.raw()), static_cast<T*>(o.raw()));
    check_launch("hgrn forward_apply");
  });
}

void hgrn_backward(const SeqLayout& seqs, const ops::HgrnInputs& in, const Tensor& d_o, const Tensor& dht,
                   ops::HgrnGrads& grads) {
  const HgrnPlan plan(seqs, in, true);
  if (plan.scan.channels == 0 || seqs.num_seqs() == 0) return;
  dispatch_float(in.x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* x = static_cast<const T*>(in.x.raw());
    const T* dout = static_cast<const T*>(d_o.raw());
    forward_carries<T>(plan, in, nullptr);
    if (plan.chunk_grid.y > 0) {
      backward_local_kernel<T><<<plan.chunk_grid, kThreads>>>(plan.scan, dout);
      check_launch("hgrn backward_local");
    }
    carry_kernel<<<plan.seq_grid, kThreads>>>(plan.scan, true, f32_or_null(dht), f32_or_null(grads.dh0));
    check_launch("hgrn carry (reverse)");
    if (plan.chunk_grid.y == 0) return;
    backward_apply_kernel<T><<<plan.chunk_grid, kThreads>>>(plan.scan, x, dout, static_cast<T*>(grads.dx.raw()),
                                                            static_cast<float*>(grads.dg.raw()));
    check_launch("hgrn backward_apply");
  });
}

}  // namespace linea::cuda
