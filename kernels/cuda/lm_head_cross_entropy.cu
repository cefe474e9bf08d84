// LM head + cross-entropy over tiles of the logits (never all N × V of them), for a head W ([V, D])
// that holds rows [vocab_begin, vocab_begin + V) of the vocabulary (the whole head: vocab_begin = 0;
// a vocabulary-parallel shard otherwise; targets are ids of the full vocabulary). For each block of
// rows x_blk of x ([N, D]) and each vocabulary chunk W_c of W:
//   logits = x_blk · W_cᵀ                                       (cuBLASLt, f32 output)
//   (m_n, s_n) ← online log-sum-exp: m = max, s = Σ exp(logit − m), merged chunk by chunk as
//                (m, s) ⊕ (m', s') = (M, s·e^{m−M} + s'·e^{m'−M}), M = max(m, m')
//   lse_n = m_n + log s_n  (over W's rows),   t_n = logit_n[target_n − vocab_begin] (0 when the
//   target is another shard's)                (both 0 when target_n = −1)
// The whole head's loss is loss_n = lse_n − t_n; a shard's statistics are (lse_n, t_n), and
// combining R shards' statistics gives the whole vocabulary's
//   lse_n = M_n + log Σ_r exp(lse_rn − M_n), M_n = max_r lse_rn,   loss_n = lse_n − Σ_r t_rn.
// Then, when gradients are wanted, chunk by chunk again with that lse (the whole head's, or the one
// a shard's backward is given; logits recomputed unless the vocabulary is a single chunk whose
// logits are still in place):
//   dlogits = loss_scale · (exp(logits − lse) − onehot(target − vocab_begin))     (0 on ignored rows)
//   dx_blk = Σ_c dlogits_c · W_c (overwritten),   dW_c += dlogits_cᵀ · x_blk    (GEMMs)
// A loss is Σ_n loss_n, added on the host in row order (f64). dlogits has the activations' dtype
// (the GEMM inputs); logits, m, s, lse, the statistics and the losses are f32. A bf16 dx summed
// over several chunks is summed in f32 and rounded once; a bf16 dW is rounded once per row block.
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

// One block per row of a chunk of `width` logits starting at row v0 of W: merges the chunk's
// (m, s) into the row's running pair (started afresh when `first`) and picks the target's logit
// when it falls in the chunk (target_logit starts at 0 with the first chunk).
__global__ void lse_chunk_kernel(const float* logits, int64_t width, int64_t v0, const int32_t* targets,
                                 int64_t vocab_begin, float* run_max, float* run_sum, float* target_logit, bool first) {
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
  const int64_t t = targets[r] < 0 ? -1 : targets[r] - vocab_begin;  // the target's row of W
  if (t >= v0 && t < v0 + width) {
    target_logit[r] = row[t - v0];
  } else if (first) {
    target_logit[r] = 0.0f;
  }
}

// lse_n and either loss_n = lse_n − t_n (loss_rows) or t_n itself (a shard's statistics); both 0
// on ignored rows.
__global__ void finish_rows_kernel(const float* run_max, const float* run_sum, const float* target_logit,
                                   const int32_t* targets, float* lse, float* per_row, bool loss_rows, int64_t rows) {
  for (int64_t r = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; r < rows; r += int64_t{gridDim.x} * blockDim.x) {
    const bool ignored = targets[r] < 0;
    const float row_lse = ignored ? 0.0f : run_max[r] + logf(run_sum[r]);
    lse[r] = row_lse;
    per_row[r] = ignored ? 0.0f : loss_rows ? row_lse - target_logit[r] : target_logit[r];
  }
}

// The R shards' statistics ([R, 2, N]) combined, one thread per row:
//   lse_n = M_n + log Σ_r exp(lse_rn − M_n), M_n = max_r lse_rn;   loss_n = lse_n − Σ_r t_rn
// (both 0 on ignored rows).
__global__ void combine_statistics_kernel(const float* stats, const int32_t* targets, int64_t n, int64_t ranks,
                                          float* lse, float* loss) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    if (targets[i] < 0) {
      lse[i] = loss[i] = 0.0f;
      continue;
    }
    float max_lse = stats[i];
    for (int64_t r = 1; r < ranks; ++r) max_lse = fmaxf(max_lse, stats[r * 2 * n + i]);
    float sum_exp = 0.0f, target_logit = 0.0f;
    for (int64_t r = 0; r < ranks; ++r) {
      sum_exp += expf(stats[r * 2 * n + i] - max_lse);
      target_logit += stats[r * 2 * n + n + i];
    }
    lse[i] = max_lse + logf(sum_exp);
    loss[i] = lse[i] - target_logit;
  }
}

// dlogits_rj = loss_scale · (exp(logit_rj − lse_r) − [vocab_begin + v0 + j = target_r]) over a
// chunk of `width` logits starting at row v0 of W (0 on ignored rows), in the activations' dtype.
template <class T>
__global__ void dlogits_kernel(T* dlogits, const float* logits, int64_t rows, int64_t width, int64_t v0,
                               const int32_t* targets, int64_t vocab_begin, const float* lse, float scale) {
  for (int64_t q = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; q < rows * width;
       q += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = q / width, j = q % width;
    const int64_t t = targets[r];
    const float d = t < 0 ? 0.0f : scale * (expf(logits[q] - lse[r]) - (vocab_begin + v0 + j == t ? 1.0f : 0.0f));
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

// What one pass over the tiles does, for a head whose row 0 is vocabulary entry vocab_begin.
struct TilePass {
  int64_t vocab_begin = 0;
  // Compute each row's lse over W's rows into lse (and loss_n or t_n into per_row, see
  // finish_rows_kernel); otherwise lse ([N]) is given.
  bool statistics = true;
  bool loss_rows = true;
  float* lse = nullptr;      // [N]; with statistics, null: scratch
  float* per_row = nullptr;  // [N]; with statistics, null: scratch
  double loss_scale = 1.0;
  Tensor dx, dweight;  // gradients wanted (either may be undefined)
};

// Runs `pass` over the tiles; returns per_row (pass.per_row, or the scratch that took its place),
// valid until the next scratch() call.
const float* run_tiles(const Tensor& x, const Tensor& weight, const Tensor& targets, TilePass pass,
                       LmHeadTiling tiling) {
  const int64_t n = x.dim(0), d = x.dim(1), v = weight.dim(0);
  const DType dtype = x.dtype();
  const Tensor& dx = pass.dx;
  const Tensor& dweight = pass.dweight;
  const bool want_grad = dx.defined() || dweight.defined();
  const int64_t block_rows = std::max<int64_t>(1, std::min(tiling.rows, n));
  const int64_t chunk = std::max<int64_t>(1, std::min(tiling.vocab, v));
  const int64_t chunks = (v + chunk - 1) / chunk;
  const bool separate_dlogits = want_grad && dtype != DType::f32;  // f32 dlogits overwrite the logits
  const bool f32_dx_sum = dx.defined() && dtype != DType::f32 && chunks > 1;
  const size_t tile = static_cast<size_t>(block_rows * chunk);
  const size_t row_floats = static_cast<size_t>(block_rows) * sizeof(float);
  const size_t all_rows = static_cast<size_t>(n) * sizeof(float);
  const bool stats = pass.statistics;  // then a block's running (m, s, t) per row, and lse, per_row
  const std::vector<void*> pieces = scratch({tile * sizeof(float), separate_dlogits ? tile * dtype_size(dtype) : 0,
                                             stats ? row_floats : 0, stats ? row_floats : 0, stats ? row_floats : 0,
                                             stats && !pass.lse ? all_rows : 0, stats && !pass.per_row ? all_rows : 0,
                                             f32_dx_sum ? static_cast<size_t>(block_rows * d) * sizeof(float) : 0});
  float* logits = static_cast<float*>(pieces[0]);
  void* dlogits = separate_dlogits ? pieces[1] : pieces[0];
  float *run_max = static_cast<float*>(pieces[2]), *run_sum = static_cast<float*>(pieces[3]);
  float* target_logit = static_cast<float*>(pieces[4]);
  float* lse = pass.lse ? pass.lse : static_cast<float*>(pieces[5]);
  float* per_row = pass.per_row ? pass.per_row : static_cast<float*>(pieces[6]);
  float* dx_sum = static_cast<float*>(pieces[7]);
  const GemmOperands to_f32{dtype, DType::f32}, same{dtype, dtype};

  for (int64_t b0 = 0; b0 < n; b0 += block_rows) {
    const int64_t rows = std::min(block_rows, n - b0);
    const void* x_blk = offset_rows(x.raw(), b0, d, dtype);
    const int32_t* t_blk = data_of<int32_t>(targets) + b0;
    auto chunk_logits = [&](int64_t v0, int64_t width) {
      gemm(false, true, rows, width, d, 1.0f, x_blk, d, offset_rows(weight.raw(), v0, d, dtype), d, 0.0f, logits, width,
           to_f32);
    };
    if (pass.statistics) {
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t v0 = c * chunk, width = std::min(chunk, v - v0);
        chunk_logits(v0, width);
        lse_chunk_kernel<<<static_cast<unsigned>(rows), kLseThreads>>>(logits, width, v0, t_blk, pass.vocab_begin,
                                                                       run_max, run_sum, target_logit, c == 0);
        check_launch("lse_chunk_kernel");
      }
      finish_rows_kernel<<<grid_stride_blocks(rows), kThreadsPerBlock>>>(run_max, run_sum, target_logit, t_blk,
                                                                         lse + b0, per_row + b0, pass.loss_rows, rows);
      check_launch("finish_rows_kernel");
    }
    if (!want_grad) continue;
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t v0 = c * chunk, width = std::min(chunk, v - v0);
      if (chunks > 1 || !pass.statistics) chunk_logits(v0, width);
      dispatch_float(dtype, [&](auto zero) {
        using T = decltype(zero);
        dlogits_kernel<T><<<grid_stride_blocks(rows * width), kThreadsPerBlock>>>(
            static_cast<T*>(dlogits), logits, rows, width, v0, t_blk, pass.vocab_begin, lse + b0,
            static_cast<float>(pass.loss_scale));
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
  return per_row;
}

// Σ_n rows[n] of a device array, added on the host in row order (f64).
double sum_in_row_order(const float* rows, int64_t n) {
  std::vector<float> host(static_cast<size_t>(n));
  check_cuda(cudaMemcpy(host.data(), rows, host.size() * sizeof(float), cudaMemcpyDeviceToHost),
             "cudaMemcpy (row losses)");
  double total = 0.0;
  for (float l : host) total += l;
  return total;
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
  const int64_t n = x.dim(0);
  if (n == 0) return 0.0;
  TilePass pass;
  pass.loss_scale = loss_scale;
  pass.dx = dx;
  pass.dweight = dweight;
  return sum_in_row_order(run_tiles(x, weight, targets, pass, tiling), n);
}

void lm_head_shard_statistics(Tensor stats, const Tensor& x, const Tensor& weight, const Tensor& targets,
                              int64_t vocab_begin, LmHeadTiling tiling) {
  const int64_t n = x.dim(0);
  if (n == 0) return;
  TilePass pass;
  pass.vocab_begin = vocab_begin;
  pass.loss_rows = false;
  pass.lse = data_of<float>(stats);
  pass.per_row = data_of<float>(stats) + n;
  run_tiles(x, weight, targets, pass, tiling);
}

double lm_head_combine_statistics(Tensor lse, const Tensor& gathered_stats, const Tensor& targets) {
  const int64_t ranks = gathered_stats.dim(0), n = gathered_stats.dim(2);
  if (n == 0) return 0.0;
  float* loss = static_cast<float*>(scratch({static_cast<size_t>(n) * sizeof(float)})[0]);
  combine_statistics_kernel<<<grid_stride_blocks(n), kThreadsPerBlock>>>(
      data_of<float>(gathered_stats), data_of<int32_t>(targets), n, ranks, data_of<float>(lse), loss);
  check_launch("combine_statistics_kernel");
  return sum_in_row_order(loss, n);
}

void lm_head_shard_backward(Tensor dx, Tensor dweight, const Tensor& x, const Tensor& weight, const Tensor& targets,
                            int64_t vocab_begin, const Tensor& lse, double loss_scale, LmHeadTiling tiling) {
  if (x.dim(0) == 0 || (!dx.defined() && !dweight.defined())) return;
  TilePass pass;
  pass.vocab_begin = vocab_begin;
  pass.statistics = false;
  pass.lse = data_of<float>(lse);
  pass.loss_scale = loss_scale;
  pass.dx = dx;
  pass.dweight = dweight;
  run_tiles(x, weight, targets, pass, tiling);
}

}  // namespace linea::cuda
