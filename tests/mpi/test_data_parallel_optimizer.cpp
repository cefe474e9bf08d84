// DistributedOptimizer under mpirun (2 and 4 ranks), AdamW and Muon:
// - each rank's own gradient, averaged over DP: the weights are, bit for bit, those of the
//   single-rank optimizer (AdamW / Muon) stepping on the average (computed here as the MPI backend
//   does: rank-order f64 sum, divided, rounded once), with ZeRO on and off;
// - with clipping, ZeRO on and off agree bit for bit (norm included);
// - with tensor parallelism (tp = 2): Muon gathers each sharded matrix, orthogonalises it whole and
//   keeps its slice, so every shard holds the bits of one-rank Muon's matrix, ZeRO on and off;
// - the state written by every rank through AsyncCheckpointWriter's collective protocol is read
//   back under another layout (1 rank, and 2 ranks out of 4) with the same bits, and training
//   continues there exactly as on one rank.
#include <gtest/gtest.h>
#include <omp.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/async_checkpoint_writer.h"
#include "kernels/random.h"
#include "model/parameter_shard.h"
#include "model/tensor_parallel.h"
#include "parallel/mpi_comm.h"
#include "parallel/process_grid.h"
#include "tests/mpi/shared_directory.h"
#include "worker/distributed_optimizer.h"
#include "worker/grad_clip.h"
#include "worker/optimizer.h"

namespace linea {
namespace {

using namespace std::chrono_literals;

void declare(ParameterSet& params) {
  params.declare("embedding", {40, 8}, ParamRole::embedding, false);
  for (int layer = 0; layer < 2; ++layer) {
    const std::string prefix = "layers." + std::to_string(layer) + ".";
    params.declare(prefix + "norm", {8}, ParamRole::vector, false);
    params.declare(prefix + "q", {8, 8}, ParamRole::matrix, true);
    params.declare(prefix + "up", {24, 8}, ParamRole::matrix, true);
    params.declare(prefix + "down", {8, 24}, ParamRole::matrix, true);
    params.declare(prefix + "conv", {8, 4}, ParamRole::conv, true);
  }
  params.declare("head", {40, 8}, ParamRole::head, true);
  params.finalize();
  Rng rng(5);
  fill_normal(params.values(), rng, 0.0, 0.3);
}

// The same parameters split over a TP group as the model splits them: matrices along their rows or
// columns (unevenly where the size does not divide), embedding and head along the vocabulary,
// norms replicated.
void declare_sharded(ParameterSet& params, const TensorParallel& tp) {
  params.declare("embedding", {40, 8}, ParamRole::embedding, false, 0, tp.split(40, "vocab"));
  for (int layer = 0; layer < 2; ++layer) {
    const std::string prefix = "layers." + std::to_string(layer) + ".";
    params.declare(prefix + "norm", {8}, ParamRole::vector, false);
    params.declare(prefix + "q", {8, 8}, ParamRole::matrix, true, 0, tp.split(8, "q"));
    params.declare(prefix + "up", {24, 8}, ParamRole::matrix, true, 0, tp.split(24, "up"));
    params.declare(prefix + "down", {8, 24}, ParamRole::matrix, true, 1, tp.split(24, "down"));
    params.declare(prefix + "conv", {8, 4}, ParamRole::conv, true, 0, tp.split(8, "conv"));
  }
  params.declare("head", {40, 8}, ParamRole::head, true, 0, tp.split(40, "vocab"));
  params.finalize();
}

// Each shard of `sharded` ← its part of the same parameter's tensor in `full` (values or grads).
void take_shards(const ParameterSet& full, ParameterSet& sharded, bool grads) {
  for (Parameter& p : sharded.params()) {
    const Parameter& whole = *full.find(p.name);
    const Tensor& from = grads ? whole.grad : whole.value;
    Tensor to = grads ? p.grad : p.value;
    if (p.shard_dim < 0) {
      to.copy_from(from);
    } else {
      copy_from_full(from, p.shard_dim, {p.shard_offset, p.shape[static_cast<size_t>(p.shard_dim)]}, to);
    }
  }
}

// The gradient rank `rank` computes at `step`.
void fill_rank_grads(ParameterSet& params, int step, int rank) {
  Rng rng(static_cast<uint64_t>(1000 * step + rank));
  fill_normal(params.grads(), rng, 0.0, 1.0);
}

// The DP average of the ranks' gradients, as the MPI backend forms it.
void fill_averaged_grads(ParameterSet& params, int step, int ranks) {
  std::vector<double> sum(static_cast<size_t>(params.numel()), 0.0);
  for (int r = 0; r < ranks; ++r) {
    fill_rank_grads(params, step, r);
    for (int64_t i = 0; i < params.numel(); ++i) sum[i] += params.grads().data<float>()[i];
  }
  for (int64_t i = 0; i < params.numel(); ++i) params.grads().data<float>()[i] = static_cast<float>(sum[i] / ranks);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

CommunicatorOptions test_options() {
  CommunicatorOptions options;
  options.validate = true;
  options.timeout = 60s;
  return options;
}

OptimizerConfig config_of(OptimizerKind kind, double grad_clip) {
  OptimizerConfig c;
  c.kind = kind;
  c.grad_clip = grad_clip;
  return c;
}

// One thread per rank: the ranks share the machine's cores (ctest runs them oversubscribed).
class DistributedOptimizerTest : public ::testing::Test {
 protected:
  void SetUp() override { omp_set_num_threads(1); }
};

TEST_F(DistributedOptimizerTest, MatchesOneRankOnTheAveragedGradient) {
  for (OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::muon}) {
    for (bool zero : {true, false}) {
      SCOPED_TRACE(std::string(optimizer_kind_name(kind)) + (zero ? " zero" : " replicated"));
      ProcessGrid grid = ProcessGrid::create({1, 0}, test_options());
      const int rank = grid.dp_rank(), ranks = grid.dp_size();
      ParameterSet replica, reference;
      declare(replica);
      declare(reference);
      const OptimizerConfig config = config_of(kind, 0);
      DistributedOptimizer optimizer(config, replica, grid.comm(GridAxis::dp), zero);
      std::unique_ptr<Optimizer> single = make_optimizer(config);
      for (int step = 1; step <= 4; ++step) {
        fill_rank_grads(replica, step, rank);
        optimizer.reduce_gradients();
        optimizer.step(0.01);
        fill_averaged_grads(reference, step, ranks);
        single->step(reference, 0.01);
        ASSERT_TRUE(bitwise_equal(replica.values(), reference.values())) << "step " << step;
      }
    }
  }
}

TEST_F(DistributedOptimizerTest, ZeroOnAndOffAgreeBitForBitWithClipping) {
  ProcessGrid grid = ProcessGrid::create({1, 0}, test_options());
  for (OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::muon}) {
    ParameterSet sharded, replicated;
    declare(sharded);
    declare(replicated);
    const OptimizerConfig config = config_of(kind, 0.5);
    DistributedOptimizer zero(config, sharded, grid.comm(GridAxis::dp), true);
    DistributedOptimizer plain(config, replicated, grid.comm(GridAxis::dp), false);
    for (int step = 1; step <= 3; ++step) {
      fill_rank_grads(sharded, step, grid.dp_rank());
      fill_rank_grads(replicated, step, grid.dp_rank());
      const double norm = zero.reduce_gradients();
      EXPECT_EQ(norm, plain.reduce_gradients());
      EXPECT_GT(norm, 0.5);  // clipping is at work
      zero.step(0.02);
      plain.step(0.02);
      ASSERT_TRUE(bitwise_equal(sharded.values(), replicated.values())) << "step " << step;
    }
  }
}

// Three steps of Muon on the shards of a tp = 2 layout and of one-rank Muon on the full tensors
// (fed the DP average of the same gradients); after each, check(shards, expected shards of the
// one-rank weights, norm of the first, norm of the second, step).
void tensor_parallel_muon_steps(
    bool zero, double grad_clip,
    const std::function<void(const ParameterSet&, const ParameterSet&, double, double, int)>& check) {
  ProcessGrid grid = ProcessGrid::create({2, 0}, test_options());
  const TensorParallel tp = TensorParallel::over(grid.comm(GridAxis::tp));
  ParameterSet shards, expected, rank_grads, reference;
  declare_sharded(shards, tp);
  declare_sharded(expected, tp);
  declare(rank_grads);
  declare(reference);
  take_shards(reference, shards, false);
  const OptimizerConfig config = config_of(OptimizerKind::muon, grad_clip);
  DistributedOptimizer optimizer(config, shards, grid.comm(GridAxis::dp), zero, tp);
  std::unique_ptr<Optimizer> single = make_optimizer(config);
  for (int step = 1; step <= 3; ++step) {
    fill_rank_grads(rank_grads, step, grid.dp_rank());  // this DP replica's gradient, split over TP
    take_shards(rank_grads, shards, true);
    const double norm = optimizer.reduce_gradients();
    optimizer.step(0.01);
    fill_averaged_grads(reference, step, grid.dp_size());
    const double reference_norm = clip_grad_norm(reference, grad_clip);
    single->step(reference, 0.01);
    take_shards(reference, expected, false);
    check(shards, expected, norm, reference_norm, step);
  }
}

TEST_F(DistributedOptimizerTest, TensorParallelMuonKeepsTheSlicesOfOneRankMuon) {
  for (bool zero : {true, false}) {
    SCOPED_TRACE(zero ? "zero" : "replicated");
    tensor_parallel_muon_steps(zero, 0,
                               [](const ParameterSet& shards, const ParameterSet& expected, double, double, int step) {
                                 ASSERT_TRUE(bitwise_equal(shards.values(), expected.values())) << "step " << step;
                               });
  }
}

TEST_F(DistributedOptimizerTest, TensorParallelNormIsTheLogicalGradientsNorm) {
  // Clipping scales by the norm, summed in another order than one rank's: equal to rounding.
  tensor_parallel_muon_steps(
      true, 0.5,
      [](const ParameterSet& shards, const ParameterSet& expected, double norm, double reference_norm, int step) {
        EXPECT_NEAR(norm, reference_norm, 1e-12 * reference_norm) << "step " << step;
        EXPECT_GT(norm, 0.5);
        for (const Parameter& p : shards.params()) {
          const float* got = p.value.data<float>();
          const float* want = expected.find(p.name)->value.data<float>();
          for (int64_t i = 0; i < p.value.numel(); ++i) {
            ASSERT_NEAR(got[i], want[i], 1e-6) << p.name << " element " << i << " step " << step;
          }
        }
      });
}

// Reads the blocks `optimizer` holds (weights and state) from a checkpoint.
void restore(CheckpointReader& reader, DistributedOptimizer& optimizer) {
  for (const CheckpointTensor& w : optimizer.held_weights()) reader.read("model/" + w.name, w.offset, w.data);
  for (const CheckpointTensor& s : optimizer.held_state()) reader.read("optimizer/" + s.name, s.offset, s.data);
  optimizer.set_step_count(reader.info().trainer_state["optimizer_step"].get<int64_t>());
}

TEST_F(DistributedOptimizerTest, StateSavedByEveryRankResumesUnderAnotherLayout) {
  testing::SharedDirectory root;
  ProcessGrid grid = ProcessGrid::create({1, 0}, test_options());
  Communicator& world = grid.comm(GridAxis::world);
  const int ranks = grid.dp_size();
  const OptimizerConfig config = config_of(OptimizerKind::muon, 0);
  ParameterSet replica, reference;
  declare(replica);
  declare(reference);
  DistributedOptimizer optimizer(config, replica, grid.comm(GridAxis::dp), true);
  std::unique_ptr<Optimizer> single = make_optimizer(config);
  for (int step = 1; step <= 3; ++step) {
    fill_rank_grads(replica, step, grid.dp_rank());
    optimizer.reduce_gradients();
    optimizer.step(0.01);
    fill_averaged_grads(reference, step, ranks);
    single->step(reference, 0.01);
  }
  {
    AsyncCheckpointWriter writer(root.path(), 2, &world);
    CheckpointState part;
    part.step = 3;
    part.trainer_state = {{"optimizer_step", optimizer.step_count()}};
    part.layout = {1, ranks, ranks};
    for (const CheckpointTensor& w : optimizer.owned_weights()) {
      part.tensors.emplace_back("model/" + w.name, w.data, w.full_shape, w.offset);
    }
    for (const CheckpointTensor& s : optimizer.owned_state()) {
      part.tensors.emplace_back("optimizer/" + s.name, s.data, s.full_shape, s.offset);
    }
    writer.save(part);
    writer.wait();
    ASSERT_FALSE(writer.last_error().has_value()) << *writer.last_error();
  }
  const std::filesystem::path directory = root.path() / checkpoint_directory_name(3);
  CheckpointReader reader(directory);
  EXPECT_EQ(reader.info().layout.world, ranks);

  // Every rank alone (a one-rank layout): the single-rank optimizer's state, bit for bit.
  {
    ProcessGrid alone = ProcessGrid::create({1, 0}, test_options(), MPI_COMM_SELF);
    ParameterSet resumed;
    declare(resumed);
    DistributedOptimizer one(config, resumed, alone.comm(GridAxis::dp), true);
    restore(reader, one);
    EXPECT_TRUE(bitwise_equal(resumed.values(), reference.values()));
    const OptimizerState expected = single->export_state();
    for (const CheckpointTensor& s : one.held_state()) {
      EXPECT_TRUE(bitwise_equal(s.data, expected.tensors.at(s.name))) << s.name;
    }
    EXPECT_EQ(one.step_count(), 3);
  }
  // With 4 ranks: resume as two DP groups of 2 and take one more step, as the single rank does.
  if (ranks == 4) {
    const MpiComm half = MpiComm::split(MPI_COMM_WORLD, grid.world_rank() / 2, 0, "half");
    ProcessGrid two = ProcessGrid::create({1, 0}, test_options(), half.get());
    ParameterSet resumed;
    declare(resumed);
    DistributedOptimizer pair(config, resumed, two.comm(GridAxis::dp), true);
    restore(reader, pair);
    fill_rank_grads(resumed, 4, two.dp_rank());
    pair.reduce_gradients();
    pair.step(0.01);
    fill_averaged_grads(reference, 4, 2);
    single->step(reference, 0.01);
    EXPECT_TRUE(bitwise_equal(resumed.values(), reference.values()));
  }
}

}  // namespace
}  // namespace linea
