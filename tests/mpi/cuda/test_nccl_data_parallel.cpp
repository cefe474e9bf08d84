// Data-parallel gradient averaging and the distributed optimizer on GPU buffers over NCCL, under
// mpirun. The DP group is the whole world when every rank has a GPU of its own (then gradients are
// averaged over R ranks); otherwise each rank forms a group alone (NCCL over MPI_COMM_SELF, on GPU
// 0), which is the single-rank path a one-GPU machine checks on every rank: averaging over one rank
// must leave the gradients as they are. Skipped without a GPU.
// - DataParallelReducer: buckets started as gradients_ready() reports parameters during an
//   "overlapped backward" (NCCL stream, events), the rest by reduce(); the result is the exact mean
//   (contributions are multiples of 1/256, so every mean over 1, 2 or 4 ranks is exact), with and
//   without overlap.
// - DistributedOptimizer (AdamW with and without ZeRO-1, Muon with owner ranks) on the GPU: the
//   same weights as the plain optimizer given the mean gradient, within err_ratio 1e-6.
// - Overlap: a simulated backward (bf16 GEMMs per block on the default stream, then the block's
//   gradients reported ready) with the reduction overlapped, and after it; the averaged gradients
//   must agree, and the step times are printed (they mean something with several GPUs only).
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/runtime.h"
#include "kernels/random.h"
#include "parallel/cuda/nccl_communicator.h"
#include "parallel/mpi_comm.h"
#include "tests/testing/assert_close.h"
#include "worker/data_parallel_reducer.h"
#include "worker/distributed_optimizer.h"
#include "worker/grad_clip.h"
#include "worker/optimizer.h"

namespace linea {
namespace {

using namespace std::chrono_literals;

// Rank r's gradient element i: a multiple of 1/256.
float contribution(int rank, int64_t i) {
  return static_cast<float>(((rank + 1) * (i % 11 + 1) - 5 * (i % 3)) / 256.0);
}

void declare(ParameterSet& ps) {
  ps.declare("embedding.weight", {40, 16}, ParamRole::embedding, true);
  ps.declare("norm.weight", {16}, ParamRole::vector, false);
  ps.declare("layers.0.q_proj.weight", {16, 16}, ParamRole::matrix, true);
  ps.declare("layers.0.up.weight", {48, 16}, ParamRole::matrix, true);
  ps.declare("layers.0.down.weight", {16, 48}, ParamRole::matrix, true);
  ps.declare("layers.0.A_log", {3}, ParamRole::gate, false);
  ps.declare("head.weight", {40, 16}, ParamRole::head, true);
  ps.finalize();
}

// Host tensor of rank r's gradient (or, with rank = −1, the mean over `ranks` ranks).
Tensor gradient(int64_t n, int rank, int ranks) {
  Tensor g = Tensor::empty({n}, DType::f32);
  for (int64_t i = 0; i < n; ++i) {
    if (rank >= 0) {
      g.data<float>()[i] = contribution(rank, i);
    } else {
      double sum = 0;
      for (int r = 0; r < ranks; ++r) sum += contribution(r, i);
      g.data<float>()[i] = static_cast<float>(sum / ranks);
    }
  }
  return g;
}

class NcclDataParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    const int devices = cuda::device_count(), size = comm_size(MPI_COMM_WORLD), rank = comm_rank(MPI_COMM_WORLD);
    if (devices == 0) GTEST_SKIP() << "no CUDA device";
    const bool whole_world = devices >= size;  // the same on every rank of one node
    cuda::set_device(whole_world ? rank : 0);
    CommunicatorOptions options;
    options.validate = true;
    options.timeout = 60s;
    dp_ = std::make_unique<NcclCommunicator>(whole_world ? MPI_COMM_WORLD : MPI_COMM_SELF, "dp", options);
  }
  std::unique_ptr<NcclCommunicator> dp_;
};

TEST_F(NcclDataParallel, ReducerAveragesBucketsStartedDuringBackward) {
  const int me = dp_->rank(), ranks = dp_->size();
  ParameterSet params(DType::f32, Device::cuda);
  declare(params);
  const Tensor mine = gradient(params.numel(), me, ranks), mean = gradient(params.numel(), -1, ranks);
  DataParallelReducer reducer(*dp_, params, 1024);  // several buckets
  ASSERT_GT(reducer.buckets().size(), 2u);
  std::printf("DP group of %d rank(s), %zu buckets\n", ranks, reducer.buckets().size());

  for (bool overlap : {true, false}) {
    Tensor(params.grads()).copy_from(mine);
    if (overlap) {
      reducer.overlap_next_backward();
      // Backward order: the last parameters first, one at a time.
      size_t started = 0;
      for (size_t p = params.params().size(); p-- > 1;) {
        reducer.gradients_ready(p, p + 1);
        EXPECT_GE(reducer.buckets_started(), started);
        started = reducer.buckets_started();
      }
      EXPECT_GT(started, 0u) << "no bucket started before the end of backward";
      EXPECT_LT(started, reducer.buckets().size()) << "parameter 0 was not reported ready yet";
      EXPECT_TRUE(dp_->overlapping());
    }
    reducer.reduce(params);
    EXPECT_FALSE(dp_->overlapping());
    const Tensor got = params.grads().clone();  // the default stream waits for the reductions
    for (int64_t i = 0; i < params.numel(); ++i) {
      ASSERT_EQ(got.data<float>()[i], mean.data<float>()[i]) << "element " << i << " overlap " << overlap;
    }
  }
}

TEST_F(NcclDataParallel, DistributedOptimizerOnTheGpuMatchesThePlainOne) {
  const int me = dp_->rank(), ranks = dp_->size();
  for (OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::muon}) {
    for (bool zero : {false, true}) {
      OptimizerConfig config;
      config.kind = kind;
      config.lr = 0.02;
      config.grad_clip = 0.05;  // clips: the norm of the mean gradient is larger
      ParameterSet distributed_params(DType::f32, Device::cuda), plain_params(DType::f32, Device::cuda);
      declare(distributed_params);
      declare(plain_params);
      Tensor start = Tensor::empty({plain_params.numel()}, DType::f32);
      Rng rng(5);
      fill_normal(start, rng, 0.0, 0.5);
      Tensor(distributed_params.values()).copy_from(start);
      Tensor(plain_params.values()).copy_from(start);
      DistributedOptimizer distributed(config, distributed_params, *dp_, zero);
      std::unique_ptr<Optimizer> plain = make_optimizer(config);
      for (int step = 0; step < 2; ++step) {
        Tensor(distributed_params.grads()).copy_from(gradient(distributed_params.numel(), me, ranks));
        Tensor(plain_params.grads()).copy_from(gradient(plain_params.numel(), -1, ranks));
        const double norm = distributed.reduce_gradients();
        const double plain_norm = clip_grad_norm(plain_params, config.grad_clip);
        EXPECT_NEAR(norm, plain_norm, 1e-12 * plain_norm);
        distributed.step(0.02);
        plain->step(plain_params, 0.02);
      }
      const testing::CloseReport r =
          testing::compare(plain_params.values().clone(), distributed_params.values().clone());
      std::printf("measured DistributedOptimizer %s%s over %d NCCL rank(s) vs plain: abs_err %.3g err_ratio %.3g\n",
                  std::string(optimizer_kind_name(kind)).c_str(), zero ? " zero" : "", ranks, r.abs_err, r.err_ratio);
      EXPECT_LT(r.err_ratio, 1e-6) << optimizer_kind_name(kind) << " zero " << zero;
    }
  }
}

TEST_F(NcclDataParallel, OverlappedReductionGivesTheSameMeanAndIsTimed) {
  constexpr int kBlocks = 8;
  constexpr int64_t kBlockNumel = int64_t{4} << 20;  // 16 MiB of f32 gradients per block
  constexpr int64_t kDim = 4096;                     // each block's "backward": two bf16 GEMMs of kDim³
  ParameterSet params(DType::f32, Device::cuda);
  for (int b = 0; b < kBlocks; ++b)
    params.declare("block" + std::to_string(b), {kBlockNumel}, ParamRole::vector, false);
  params.finalize();
  DataParallelReducer reducer(*dp_, params, kBlockNumel * 4);  // a bucket per block
  const Tensor a = Tensor::zeros({kDim, kDim}, DType::bf16, Device::cuda),
               c = Tensor::empty({kDim, kDim}, DType::bf16, Device::cuda);
  const Tensor mine = gradient(params.numel(), dp_->rank(), dp_->size());
  const auto backward = [&](bool overlap) {  // returns milliseconds for backward + reduction
    Tensor(params.grads()).copy_from(mine);
    dp_->barrier();
    const auto start = std::chrono::steady_clock::now();
    if (overlap) reducer.overlap_next_backward();
    for (int b = kBlocks; b-- > 0;) {
      for (int k = 0; k < 2; ++k) {
        cuda::gemm(false, false, kDim, kDim, kDim, 1.0f, a.raw(), kDim, a.raw(), kDim, 0.0f, c.raw(), kDim,
                   {DType::bf16, DType::bf16});
      }
      reducer.gradients_ready(static_cast<size_t>(b), static_cast<size_t>(b) + 1);
    }
    reducer.reduce(params);
    cuda::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  backward(true);  // warm-up: cuBLASLt plans, NCCL buffers
  const Tensor overlapped_mean = params.grads().clone();
  backward(false);
  const Tensor after_mean = params.grads().clone();
  for (int64_t i = 0; i < params.numel(); i += 4099) {
    ASSERT_EQ(overlapped_mean.data<float>()[i], after_mean.data<float>()[i]) << "element " << i;
  }
  double overlapped = 1e30, after = 1e30;
  for (int repeat = 0; repeat < 3; ++repeat) {
    overlapped = std::min(overlapped, backward(true));
    after = std::min(after, backward(false));
  }
  std::printf(
      "measured %d NCCL rank(s), %d blocks of 2 GEMMs %ld^3 bf16 + a 16 MiB bucket each: reduction after "
      "backward %.3f ms, overlapped %.3f ms\n",
      dp_->size(), kBlocks, static_cast<long>(kDim), after, overlapped);
}

}  // namespace
}  // namespace linea
