// DistributedOptimizer with one DP rank: the same bits as AdamW and Muon, the gradient norm and
// clipping of clip_grad_norm, state described as blocks of the full tensors, clear errors.
// (Several ranks: tests/mpi/test_distributed_optimizer.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "kernels/random.h"
#include "parallel/process_grid.h"
#include "worker/adamw.h"
#include "worker/distributed_optimizer.h"
#include "worker/grad_clip.h"
#include "worker/muon.h"

namespace linea {
namespace {

void declare(ParameterSet& params) {
  params.declare("embedding", {12, 8}, ParamRole::embedding, false);
  params.declare("q", {8, 8}, ParamRole::matrix, true);
  params.declare("up", {16, 8}, ParamRole::matrix, true);
  params.declare("norm", {8}, ParamRole::vector, false);
  params.declare("gate", {}, ParamRole::gate, false);
  params.finalize();
  Rng rng(5);
  fill_normal(params.values(), rng, 0.0, 0.3);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

OptimizerConfig config_of(OptimizerKind kind) {
  OptimizerConfig c;
  c.kind = kind;
  c.lr = 0.02;
  c.grad_clip = 0;  // the single-rank optimizers do not clip
  return c;
}

class OneRank : public ::testing::TestWithParam<std::tuple<OptimizerKind, DType>> {};

TEST_P(OneRank, SameBitsAsTheSingleRankOptimizer) {
  const auto [kind, dtype] = GetParam();
  ProcessGrid grid = ProcessGrid::create({1, 0});
  ParameterSet distributed(dtype), reference(dtype);
  declare(distributed);
  declare(reference);
  const OptimizerConfig config = config_of(kind);
  DistributedOptimizer optimizer(config, distributed, grid.comm(GridAxis::dp), /*zero=*/true);
  std::unique_ptr<Optimizer> single = make_optimizer(config);
  Rng rng(11);
  for (int step = 1; step <= 4; ++step) {
    fill_normal(distributed.grads(), rng, 0.0, 1.0);
    reference.grads().copy_from(distributed.grads());
    const double norm = optimizer.reduce_gradients();
    EXPECT_NEAR(norm, grad_norm(reference), 1e-12 * norm);
    optimizer.step(0.01 * step);
    single->step(reference, 0.01 * step);
    ASSERT_TRUE(bitwise_equal(distributed.values(), reference.values())) << "step " << step;
  }
  EXPECT_EQ(optimizer.step_count(), 4);
  // The state is the single-rank optimizer's, tensor for tensor, each block the whole tensor.
  const OptimizerState state = single->export_state();
  const auto blocks = optimizer.owned_state();
  ASSERT_EQ(blocks.size(), state.tensors.size());
  for (const CheckpointTensor& b : blocks) {
    ASSERT_TRUE(state.tensors.count(b.name)) << b.name;
    const Tensor& expected = state.tensors.at(b.name);
    EXPECT_EQ(b.full_shape, expected.shape()) << b.name;
    EXPECT_EQ(b.offset, std::vector<int64_t>(expected.shape().size(), 0)) << b.name;
    EXPECT_TRUE(bitwise_equal(b.data, expected)) << b.name;
  }
  EXPECT_EQ(optimizer.held_state().size(), blocks.size());
  EXPECT_EQ(optimizer.owned_weights().size(), distributed.params().size());
}

INSTANTIATE_TEST_SUITE_P(KindsAndDtypes, OneRank,
                         ::testing::Combine(::testing::Values(OptimizerKind::adamw, OptimizerKind::muon),
                                            ::testing::Values(DType::f32, DType::f64)));

TEST(DistributedOptimizer, ClipsLikeClipGradNorm) {
  ProcessGrid grid = ProcessGrid::create({1, 0});
  ParameterSet a(DType::f64), b(DType::f64);
  declare(a);
  declare(b);
  OptimizerConfig config = config_of(OptimizerKind::adamw);
  config.grad_clip = 0.5;
  DistributedOptimizer optimizer(config, a, grid.comm(GridAxis::dp), true);
  Rng rng(2);
  fill_normal(a.grads(), rng, 0.0, 1.0);
  b.grads().copy_from(a.grads());
  const double norm = optimizer.reduce_gradients();
  EXPECT_NEAR(norm, clip_grad_norm(b, 0.5), 1e-12 * norm);
  ASSERT_GT(norm, 0.5);
  for (int64_t i = 0; i < a.numel(); ++i) {
    EXPECT_NEAR(a.grads().data<double>()[i], b.grads().data<double>()[i], 1e-14) << i;
  }
  EXPECT_NEAR(grad_norm(a), 0.5, 1e-6);
}

TEST(DistributedOptimizer, RejectsWhatItCannotUpdate) {
  ProcessGrid grid = ProcessGrid::create({1, 0});
  ParameterSet cube;
  cube.declare("w", {2, 2, 2}, ParamRole::matrix, true);
  cube.finalize();
  try {
    DistributedOptimizer(config_of(OptimizerKind::muon), cube, grid.comm(GridAxis::dp), true);
    FAIL() << "a 3-D matrix was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'w' has role matrix but shape [2, 2, 2]"), std::string::npos) << e.what();
  }
  DistributedOptimizer(config_of(OptimizerKind::adamw), cube, grid.comm(GridAxis::dp), true);  // AdamW: fine

  ParameterSet unfinished;
  unfinished.declare("w", {2}, ParamRole::vector, false);
  EXPECT_THROW(DistributedOptimizer(config_of(OptimizerKind::adamw), unfinished, grid.comm(GridAxis::dp), true),
               std::invalid_argument);
  ParameterSet params;
  declare(params);
  DistributedOptimizer optimizer(config_of(OptimizerKind::adamw), params, grid.comm(GridAxis::dp), true);
  EXPECT_THROW(optimizer.step(-1.0), std::invalid_argument);
  EXPECT_THROW(optimizer.set_step_count(-2), std::invalid_argument);
  OptimizerConfig bad = config_of(OptimizerKind::adamw);
  bad.beta1 = 1.5;
  EXPECT_THROW(DistributedOptimizer(bad, params, grid.comm(GridAxis::dp), true), std::invalid_argument);
}

}  // namespace
}  // namespace linea
