// Tensor parallelism on GPUs over NCCL, under mpirun: TP = the whole world, one GPU per rank.
// Skipped (on every rank alike) when the node has fewer GPUs than ranks.
// - A small GDN / softmax-attention hybrid (vocabulary-parallel embedding and untied LM head split
//   unevenly, heads and MLP width split, o_proj and down split on their inputs) built with TP = R
//   on the GPUs gives the loss and, gathered from the shards, every gradient of the same model
//   built whole (TP = 1) on each rank's GPU, over two micro-batches: f32 compute within 1e-5
//   (loss, relative) and err_ratio 1e-4 (each gradient tensor); bf16 compute (bf16 partial sums
//   summed over TP) within 1e-2 and err_ratio 0.2, the bounds of the GPU-vs-CPU model test
//   (tests/gpu/test_gpu_model.cpp); the logical gradient norm² within 1e-5 (bf16: 5e-2). Replicated
//   gradients are the same on every TP rank; evaluate() gives the whole model's loss. The same for
//   hybrids of GLA, RetNet, HGRN, HGRN-2, Mamba-2 and RWKV-6 (not yet run on GPUs).
// - One DistributedOptimizer step (Muon for the matrices, AdamW for the rest) on the TP shards,
//   given the shards of the whole model's gradients, moves every parameter, gathered, as the plain
//   Muon step moves the whole model (update err_ratio 2e-3 for Muon's matrices, whose bf16
//   Newton–Schulz may sum in another order; 1e-6 for AdamW's); the matrices split on dimension 0
//   (q, k, v, gate/up) and on dimension 1 (o_proj, down) are gathered over NCCL on device buffers.
//   The gradient norm (summed over TP through the host) equals the whole model's.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/runtime.h"
#include "model/model.h"
#include "model/parameter_shard.h"
#include "parallel/mpi_comm.h"
#include "parallel/process_grid.h"
#include "tests/testing/assert_close.h"
#include "tests/testing/model_inputs.h"
#include "worker/distributed_optimizer.h"
#include "worker/grad_clip.h"
#include "worker/optimizer.h"

namespace linea {
namespace {

using namespace std::chrono_literals;
using testing::assert_close;
using testing::to_f64;

// Splits over R = 2 or 4 ranks: vocabulary 97 unevenly, MLP width 96, 4 heads of the linear mixer
// (HGRN: 64 channels; HGRN-2's forget width 16 makes its 4 heads), 8 attention heads over 4 kv heads
// (GQA groups of 2, head_dim 64 as the CUDA attention supports) evenly.
ModelConfig gpu_hybrid(const std::string& mixer = "gdn") {
  return testing::tiny_hybrid_config(mixer, /*tied=*/false,
                                     {.d_model = 64,
                                      .layers = 2,
                                      .vocab = 97,
                                      .mlp_hidden = 96,
                                      .init_std = 0.1,
                                      .linear_heads = 4,
                                      .d_k = mixer == "hgrn2" ? 16 : 32,
                                      .d_v = 32,
                                      .conv = 4,
                                      .decay_rank = 16,
                                      .gate_rank = 16,
                                      .attention_heads = 8,
                                      .kv_heads = 4,
                                      .head_dim = 64});
}

// Packed documents of 37, 63, 70 and 30 tokens with next-token targets.
testing::PackedBatch packed_batch(int64_t vocab, uint64_t seed) {
  return testing::packed_batch({37, 63, 70, 30}, vocab, seed);
}

class NcclTensorParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    const int devices = cuda::device_count(), size = comm_size(MPI_COMM_WORLD);
    if (devices < size) {
      GTEST_SKIP() << "TP over " << size << " ranks needs a GPU per rank; " << devices << " visible";
    }
    CommunicatorOptions options;
    options.validate = true;
    options.timeout = 60s;
    grid_ = std::make_unique<ProcessGrid>(ProcessGrid::create({size, 1}, options));
    grid_->enable_cuda();  // this rank's GPU, NCCL communicators
  }
  Communicator& tp() { return grid_->comm(GridAxis::tp, Device::cuda); }
  std::unique_ptr<ProcessGrid> grid_;
};

// The full tensor of p's shard `shard` (on the GPU), as f64 on the host.
Tensor gathered(const Parameter& p, const Tensor& shard, Communicator& tp) { return to_f64(gather_full(p, shard, tp)); }

// Whether t (on the GPU) holds the same bytes on every rank of `group` (compared on the host).
bool same_on_every_rank(const Tensor& t, Communicator& group) {
  const Tensor host = t.clone();
  Tensor all = Tensor::empty({group.size(), t.numel()}, t.dtype(), Device::cuda);
  group.all_gather(t.reshape({t.numel()}), all);
  const Tensor every = all.clone();
  for (int r = 0; r < group.size(); ++r) {
    if (std::memcmp(static_cast<const char*>(every.raw()) + r * t.nbytes(), host.raw(), t.nbytes()) != 0) return false;
  }
  return true;
}

// The body of the ModelMatchesTheWholeModel tests, for `config`'s hybrid.
void expect_model_matches_the_whole_model(const ModelConfig& config, Communicator& tp) {
  for (DType compute : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(config.mixer + ", compute " + std::string(dtype_name(compute)));
    const double loss_tolerance = compute == DType::bf16 ? 1e-2 : 1e-5;
    const double grad_tolerance = compute == DType::bf16 ? 0.2 : 1e-4;
    Model whole(config, DType::f32, true, {}, Device::cuda, compute);
    Model model(config, DType::f32, true, TensorParallel::over(tp), Device::cuda, compute);
    whole.init_parameters(11);
    model.init_parameters(11);
    int64_t sharded = 0;
    for (const Parameter& p : model.params().params()) sharded += p.shard_dim >= 0;
    EXPECT_GT(sharded, 0);

    const testing::PackedBatch first = packed_batch(config.vocab, 9), second = packed_batch(config.vocab, 10);
    whole.params().zero_grads();
    model.params().zero_grads();
    double loss = 0, whole_loss = 0;
    for (const testing::PackedBatch* b : {&first, &second}) {
      loss += model.forward_backward(b->ids, b->targets, b->seqs, 0.5);
      whole_loss += whole.forward_backward(b->ids, b->targets, b->seqs, 0.5);
    }
    EXPECT_NEAR(loss, whole_loss, loss_tolerance * whole_loss);
    const double whole_norm = grad_sum_of_squares(whole.params());
    EXPECT_NEAR(grad_sum_of_squares(model.params(), model.tensor_parallel()), whole_norm,
                (compute == DType::bf16 ? 5e-2 : 1e-5) * whole_norm);

    double worst = 0;
    for (const Parameter& p : model.params().params()) {
      const Parameter& w = *whole.params().find(p.name);
      const Tensor want = to_f64(w.grad), got = gathered(p, p.grad, tp);
      worst = std::max(worst, testing::compare(want, got).err_ratio);
      EXPECT_TRUE(assert_close(p.name + " gradient", want, got, grad_tolerance));
      if (p.shard_dim < 0) {
        EXPECT_TRUE(same_on_every_rank(p.grad, tp)) << p.name << ": differs across TP";
      }
    }
    if (tp.rank() == 0) {
      std::printf("measured TP %d on NCCL, %s, %s compute: loss %.8f (TP 1: %.8f), worst gradient err_ratio %.3g\n",
                  tp.size(), config.mixer.c_str(), std::string(dtype_name(compute)).c_str(), loss, whole_loss, worst);
    }

    const double eval = model.evaluate(first.ids, first.targets, first.seqs);
    EXPECT_NEAR(eval, whole.evaluate(first.ids, first.targets, first.seqs), loss_tolerance * whole_loss);
  }
}

TEST_F(NcclTensorParallel, ModelMatchesTheWholeModel) { expect_model_matches_the_whole_model(gpu_hybrid(), tp()); }

// The gated-linear-attention family and HGRN (heads or channels split; HGRN's, HGRN-2's and
// Mamba-2's norms over the full width gather the ranks' columns: ops::column_place / column_slice).
TEST_F(NcclTensorParallel, GlaFamilyAndHgrnMatchTheWholeModel) {
  for (const char* mixer : {"gla", "retnet", "hgrn", "hgrn2", "mamba2", "rwkv6"}) {
    expect_model_matches_the_whole_model(gpu_hybrid(mixer), tp());
  }
}

TEST_F(NcclTensorParallel, MuonStepOnShardsMatchesTheWholeStep) {
  const ModelConfig config = gpu_hybrid();
  Model whole(config, DType::f32, true, {}, Device::cuda, DType::f32);
  Model model(config, DType::f32, true, TensorParallel::over(tp()), Device::cuda, DType::f32);
  whole.init_parameters(21);
  model.init_parameters(21);
  const testing::PackedBatch batch = packed_batch(config.vocab, 22);
  whole.params().zero_grads();
  whole.forward_backward(batch.ids, batch.targets, batch.seqs, 1.0);
  // The shards take exactly the whole model's gradients, so that only the optimizers differ.
  int64_t split_on_inputs = 0;
  for (Parameter& p : model.params().params()) {
    const Parameter& w = *whole.params().find(p.name);
    if (p.shard_dim < 0) {
      p.grad.copy_from(w.grad);
    } else {
      copy_from_full(w.grad, p.shard_dim, {p.shard_offset, p.shape[static_cast<size_t>(p.shard_dim)]}, p.grad);
      split_on_inputs += p.shard_dim == 1 && takes_muon(p);
    }
  }
  EXPECT_GT(split_on_inputs, 0) << "no Muon matrix split on dimension 1";

  OptimizerConfig oc;
  oc.kind = OptimizerKind::muon;
  oc.lr = 0.02;
  oc.grad_clip = 0;
  DistributedOptimizer distributed(oc, model.params(), grid_->comm(GridAxis::dp, Device::cuda), /*zero=*/false,
                                   model.tensor_parallel());
  std::unique_ptr<Optimizer> plain = make_optimizer(oc);
  const Tensor whole_before = to_f64(whole.params().values());
  std::vector<Tensor> before;
  for (const Parameter& p : model.params().params()) before.push_back(gathered(p, p.value, tp()));

  const double norm = distributed.reduce_gradients();
  const double whole_norm = std::sqrt(grad_sum_of_squares(whole.params()));
  EXPECT_NEAR(norm, whole_norm, 1e-9 * whole_norm);
  distributed.step(0.02);
  plain->step(whole.params(), 0.02);

  const Tensor whole_after = to_f64(whole.params().values());
  double worst = 0;
  size_t i = 0;
  for (const Parameter& p : model.params().params()) {
    const Parameter& w = *whole.params().find(p.name);
    const int64_t numel = shape_numel(w.shape);
    Tensor want = Tensor::empty(w.shape, DType::f64), got = gathered(p, p.value, tp());
    for (int64_t k = 0; k < numel; ++k) {
      want.data<double>()[k] = whole_after.data<double>()[w.offset + k] - whole_before.data<double>()[w.offset + k];
      got.data<double>()[k] -= before[i].data<double>()[k];
    }
    ++i;
    worst = std::max(worst, testing::compare(want, got).err_ratio);
    // AdamW: the same arithmetic on the same elements; Muon: the same matrix orthogonalised by
    // bf16 Newton–Schulz GEMMs, which may differ in summation order from one buffer to another.
    const double bound = takes_muon(p) ? 2e-3 : 1e-6;
    EXPECT_TRUE(assert_close(p.name + " update (" + (takes_muon(p) ? "Muon" : "AdamW") + ")", want, got, bound, 1e-9));
  }
  if (tp().rank() == 0) {
    std::printf("measured TP %d on NCCL: one Muon step on the shards vs the whole model: worst update err_ratio %.3g\n",
                tp().size(), worst);
  }
}

}  // namespace
}  // namespace linea
