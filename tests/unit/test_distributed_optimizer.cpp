// DistributedOptimizer with one DP rank: the same bits as AdamW and Muon, the gradient norm and
// clipping of clip_grad_norm, state described as blocks of the full tensors, clear errors.
// (Several ranks: tests/mpi/test_distributed_optimizer.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
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

// The norm is clip_grad_norm's; the clip factor is applied inside the update (the gradient buffers
// keep the unscaled average), rounded as ops::scale rounds it: the step's weights are the bits of
// the single-rank optimizer on gradients scaled by that factor first.
TEST(DistributedOptimizer, ClipsLikeClipGradNorm) {
  for (OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::muon}) {
    SCOPED_TRACE(optimizer_kind_name(kind));
    ProcessGrid grid = ProcessGrid::create({1, 0});
    ParameterSet a(DType::f64), b(DType::f64), clipped(DType::f64);
    declare(a);
    declare(b);
    declare(clipped);
    OptimizerConfig config = config_of(kind);
    config.grad_clip = 0.5;
    DistributedOptimizer optimizer(config, a, grid.comm(GridAxis::dp), true);
    std::unique_ptr<Optimizer> single = make_optimizer(config_of(kind));
    Rng rng(2);
    fill_normal(a.grads(), rng, 0.0, 1.0);
    b.grads().copy_from(a.grads());
    clipped.grads().copy_from(a.grads());
    const Tensor unscaled = a.grads().clone();
    const double norm = optimizer.reduce_gradients();
    EXPECT_NEAR(norm, clip_grad_norm(clipped, 0.5), 1e-12 * norm);
    ASSERT_GT(norm, 0.5);
    EXPECT_NEAR(grad_norm(clipped), 0.5, 1e-6);
    EXPECT_EQ(optimizer.gradient_scale(), 0.5 / (norm + 1e-6));
    EXPECT_TRUE(bitwise_equal(a.grads(), unscaled)) << "the gradient buffers keep the unscaled average";

    scale_grads(b, optimizer.gradient_scale());
    optimizer.step(0.01);
    single->step(b, 0.01);
    EXPECT_TRUE(bitwise_equal(a.values(), b.values()));
    EXPECT_EQ(optimizer.gradient_scale(), 1.0) << "a step uses the factor once";
  }
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
