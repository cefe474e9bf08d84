// LM head + cross-entropy over tiles of the logits (never all N × V of them). For each block of
// rows x_blk of x ([N, D]) and each vocabulary chunk W_c of the head W ([V, D]):
//   logits = x_blk · W_cᵀ                                       (cuBLASLt, f32 output)
//   (m_n, s_n) ← online log-sum-exp: m = max, s = Σ exp(logit − m), merged chunk by chunk as
//                (m, s) ⊕ (m', s') = (M, s·e^{m−M} + s'·e^{m'−M}), M = max(m, m')
//   lse_n = m_n + log s_n,   loss_n = lse_n − logit_n[target_n]   (0 when target_n = −1)
// then, when gradients are wanted, chunk by chunk again (logits recomputed unless the vocabulary
// is a single chunk, whose logits are still in place):
//   dlogits = loss_scale · (exp(logits − lse) − onehot(target))     (0 on ignored rows)
//   dx_blk = Σ_c dlogits_c · W_c (overwritten),   dW_c += dlogits_cᵀ · x_blk    (GEMMs)
// The loss is Σ_n loss_n, added on the host in row order (f64). dlogits has the activations'
// dtype (the GEMM inputs); logits, m, s and the losses are f32. A bf16 dx summed over several
// chunks is summed in f32 and rounded once; a bf16 dW is rounded once per row block.
#include <algorithm>
#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/cuda/element_types.cuh"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/warp_reduce.cuh"

namespace linea::cuda {

namespace {
constexpr int64_t kLogitsPerTile = int64_t{1} << 26;  // 256 MiB of f32 logits
constexpr int64_t kVocabChunk = 32768;
constexpr int kLseThreads = 512;

struct LogSumExp {
  float m, s;  // max and Σ exp(· − max); (−inf, 0) is empty
};

__device__ __forceinline__ LogSumExp merge(LogSumExp a, LogSumExp b) {
  const float M = fmaxf(a.m, b.m);
  if (M == -INFINITY) return {M, 0.0f};
  return {M, a.s * expf(a.m - M) + b.s * expf(b.m - M)};
}

// One block per row of a chunk of `width` logits starting at vocabulary entry v0: merges the
// chunk's (m, s) into the row's running pair (started afresh when `first`) and picks the target's
// logit when it falls in the chunk.
__global__ void lse_chunk_kernel(const float* logits, int64_t width, int64_t v0, const int32_t* targets, float* run_max,
                                 float* run_sum, float* target_logit, bool first) {
  const int64_t r = blockIdx.x;
  const float* row = logits + r * width;
  LogSumExp acc{-INFINITY, 0.0f};
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    const float l = row[j];
    if (l > acc.m) {
      acc.s = acc.s * expf(acc.m - l) + 1.0f;
      acc.m = l;
    } else {
      acc.s += expf(l - acc.m);
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const LogSumExp other{__shfl_xor_sync(0xffffffffu, acc.m, offset), __shfl_xor_sync(0xffffffffu, acc.s, offset)};
    acc = merge(acc, other);
  }
  __shared__ LogSumExp warps[kLseThreads / kWarpSize];
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  if (lane == 0) warps[warp] = acc;
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < static_cast<int>(blockDim.x) / kWarpSize; ++w) acc = merge(acc, warps[w]);
  if (!first) acc = merge({run_max[r], run_sum[r]}, acc);
  run_max[r] = acc.m;
  run_sum[r] = acc.s;
  const int64_t t = targets[r];
  if (t >= v0 && t < v0 + width) target_logit[r] = row[t - v0];
}

// lse_n (kept in run_max) and loss_n.
__global__ void finish_rows_kernel(float* run_max, const float* run_sum, const float* target_logit,
                                   const int32_t* targets, float* loss, int64_t rows) {
  for (int64_t r = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; r < rows; r += int64_t{gridDim.x} * blockDim.x) {
    const float lse = run_max[r] + logf(run_sum[r]);
    run_max[r] = lse;
    loss[r] = targets[r] < 0 ? 0.0f : lse - target_logit[r];
  }
}

template <class T>
__global__ void dlogits_kernel(T* dlogits, const float* logits, int64_t rows, int64_t width, int64_t v0,
                               const int32_t* targets, const float* lse, float scale) {
  for (int64_t q = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; q < rows * width;
       q += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = q / width, j = q % width;
    const int64_t t = targets[r];
    const float d = t < 0 ? 0.0f : scale * (expf(logits[q] - lse[r]) - (v0 + j == t ? 1.0f : 0.0f));
    dlogits[q] = from_float<T>(d);
  }
}

template <class T>
__global__ void store_kernel(T* out, const float* in, int64_t n) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = from_float<T>(in[i]);
  }
}

// The address of row `rows` of a row-major matrix of `width` elements per row.
void* offset_rows(void* p, int64_t rows, int64_t width, DType dtype) {
  return static_cast<char*>(p) + rows * width * static_cast<int64_t>(dtype_size(dtype));
}
}  // namespace

LmHeadTiling lm_head_default_tiling(int64_t n, int64_t v) {
  const int64_t vocab = std::max<int64_t>(1, std::min(v, kVocabChunk));
  int64_t rows = std::max<int64_t>(1, std::min(n, kLogitsPerTile / vocab));
  if (rows > 128) rows -= rows % 128;
  return {rows, vocab};
}

double lm_head_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& targets, double loss_scale, Tensor dx,
                             Tensor dweight, LmHeadTiling tiling) {
  const int64_t n = x.dim(0), d = x.dim(1), v = weight.dim(0);
  if (n == 0) return 0.0;
  const DType dtype = x.dtype();
  const bool want_grad = dx.defined() || dweight.defined();
  const int64_t block_rows = std::max<int64_t>(1, std::min(tiling.rows, n));
  const int64_t chunk = std::max<int64_t>(1, std::min(tiling.vocab, v));
  const int64_t chunks = (v + chunk - 1) / chunk;
  const bool separate_dlogits = want_grad && dtype != DType::f32;  // f32 dlogits overwrite the logits
  const bool f32_dx_sum = dx.defined() && dtype != DType::f32 && chunks > 1;
  const size_t tile = static_cast<size_t>(block_rows * chunk);
  const size_t row_floats = static_cast<size_t>(block_rows) * sizeof(float);
  const std::vector<void*> pieces = scratch({tile * sizeof(float), separate_dlogits ? tile * dtype_size(dtype) : 0,
                                             row_floats, row_floats, row_floats, static_cast<size_t>(n) * sizeof(float),
                                             f32_dx_sum ? static_cast<size_t>(block_rows * d) * sizeof(float) : 0});
  float* logits = static_cast<float*>(pieces[0]);
  void* dlogits = separate_dlogits ? pieces[1] : pieces[0];
  float *run_max = static_cast<float*>(pieces[2]), *run_sum = static_cast<float*>(pieces[3]);
  float *target_logit = static_cast<float*>(pieces[4]), *loss = static_cast<float*>(pieces[5]);
  float* dx_sum = static_cast<float*>(pieces[6]);
  const GemmOperands to_f32{dtype, DType::f32}, same{dtype, dtype};

  for (int64_t b0 = 0; b0 < n; b0 += block_rows) {
    const int64_t rows = std::min(block_rows, n - b0);
    const void* x_blk = offset_rows(x.raw(), b0, d, dtype);
    const int32_t* t_blk = data_of<int32_t>(targets) + b0;
    auto chunk_logits = [&](int64_t v0, int64_t width) {
      gemm(false, true, rows, width, d, 1.0f, x_blk, d, offset_rows(weight.raw(), v0, d, dtype), d, 0.0f, logits, width,
           to_f32);
    };
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t v0 = c * chunk, width = std::min(chunk, v - v0);
      chunk_logits(v0, width);
      lse_chunk_kernel<<<static_cast<unsigned>(rows), kLseThreads>>>(logits, width, v0, t_blk, run_max, run_sum,
                                                                     target_logit, c == 0);
      check_launch("lse_chunk_kernel");
    }
    finish_rows_kernel<<<grid_stride_blocks(rows), kThreadsPerBlock>>>(run_max, run_sum, target_logit, t_blk, loss + b0,
                                                                       rows);
    check_launch("finish_rows_kernel");
    if (!want_grad) continue;
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t v0 = c * chunk, width = std::min(chunk, v - v0);
      if (chunks > 1) chunk_logits(v0, width);
      dispatch_float(dtype, [&](auto zero) {
        using T = decltype(zero);
        dlogits_kernel<T><<<grid_stride_blocks(rows * width), kThreadsPerBlock>>>(
            static_cast<T*>(dlogits), logits, rows, width, v0, t_blk, run_max, static_cast<float>(loss_scale));
        check_launch("dlogits_kernel");
      });
      const void* w_chunk = offset_rows(weight.raw(), v0, d, dtype);
      if (dx.defined()) {
        gemm(false, false, rows, d, width, 1.0f, dlogits, width, w_chunk, d, c == 0 ? 0.0f : 1.0f,
             f32_dx_sum ? dx_sum : offset_rows(dx.raw(), b0, d, dtype), d, f32_dx_sum ? to_f32 : same);
      }
      if (dweight.defined()) {
        gemm(true, false, width, d, rows, 1.0f, dlogits, width, x_blk, d, 1.0f,
             offset_rows(dweight.raw(), v0, d, dtype), d, same);
      }
    }
    if (f32_dx_sum) {
      dispatch_float(dtype, [&](auto zero) {
        using T = decltype(zero);
        store_kernel<<<grid_stride_blocks(rows * d), kThreadsPerBlock>>>(
            static_cast<T*>(offset_rows(dx.raw(), b0, d, dtype)), dx_sum, rows * d);
        check_launch("store_kernel");
      });
    }
  }
  std::vector<float> host_loss(static_cast<size_t>(n));
  check_cuda(cudaMemcpy(host_loss.data(), loss, host_loss.size() * sizeof(float), cudaMemcpyDeviceToHost),
             "cudaMemcpy (row losses)");
  double total = 0.0;
  for (float l : host_loss) total += l;
  return total;
}

}  // namespace linea::cuda
