// The single-process pieces of tensor parallelism: how TensorParallel splits a dimension (even and
// uneven, errors naming the config key), its validation, sharded parameter declarations, copying a
// shard out of and into a full tensor, shard-wise initialisation that reproduces the full draw,
// and that a model without TP holds every parameter whole. (The model under TP: tests/mpi.)
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/random.h"
#include "model/mixers/attention/attention_config.h"
#include "model/mixers/delta_rule/delta_rule_config.h"
#include "model/model.h"
#include "model/parameter_shard.h"
#include "model/tensor_parallel.h"
#include "parallel/local_communicator.h"
#include "tests/testing/kernel_test.h"

namespace linea {
namespace {

using testing::throws_invalid_argument;

TEST(TensorParallelLayout, SplitsInRankOrderWithTheRemainderFirst) {
  const std::vector<std::pair<int64_t, int64_t>> expected{{0, 3}, {3, 3}, {6, 2}, {8, 2}};
  for (int rank = 0; rank < 4; ++rank) {
    const ShardRange r = TensorParallel{nullptr, rank, 4}.split(10, "model.vocab");
    EXPECT_EQ(r.begin, expected[rank].first) << rank;
    EXPECT_EQ(r.size, expected[rank].second) << rank;
    const ShardRange even = TensorParallel{nullptr, rank, 4}.split_evenly(8, "model.linear.heads");
    EXPECT_EQ(even.begin, 2 * rank);
    EXPECT_EQ(even.size, 2);
  }
  const ShardRange whole = TensorParallel{}.split(7, "model.vocab");
  EXPECT_EQ(whole.begin, 0);
  EXPECT_EQ(whole.size, 7);
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        TensorParallel{nullptr, 0, 4}.split_evenly(6, "model.linear.heads");
      },
      {"model.linear.heads = 6", "4 tensor-parallel ranks"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        TensorParallel{nullptr, 1, 4}.split(3, "model.vocab");
      },
      {"model.vocab = 3", "smaller than the tensor-parallel size 4"}));
}

TEST(TensorParallelLayout, ValidatesItsCommunicator) {
  LocalCommunicator local("tp", Device::cpu);
  EXPECT_NO_THROW(TensorParallel{}.validate());
  EXPECT_NO_THROW(TensorParallel::over(local).validate());
  EXPECT_TRUE(throws_invalid_argument([] { TensorParallel{nullptr, 2, 2}.validate(); }, {"rank 2 of 2", "[0, size)"}));
  EXPECT_TRUE(throws_invalid_argument([] { TensorParallel{nullptr, 0, 0}.validate(); }, {"size >= 1"}));
  EXPECT_TRUE(throws_invalid_argument([] { TensorParallel{nullptr, 0, 2}.validate(); }, {"needs a communicator"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        TensorParallel{&local, 1, 2}.validate();
      },
      {"rank 1 of 2", "communicator 'tp' is rank 0 of 1"}));
}

TEST(TensorParallelLayout, DeclaresShardsAndRecordsWholeOnesAsReplicated) {
  ParameterSet params(DType::f32);
  Parameter* rows = params.declare("rows", {6, 4}, ParamRole::matrix, true, 0, {2, 3});
  Parameter* columns = params.declare("columns", {6, 4}, ParamRole::matrix, true, 1, {1, 2});
  Parameter* whole = params.declare("whole", {6, 4}, ParamRole::matrix, true, 0, {0, 6});
  Parameter* plain = params.declare("plain", {5}, ParamRole::vector, false);
  EXPECT_EQ(rows->shape, (Shape{3, 4}));
  EXPECT_EQ(rows->full_shape, (Shape{6, 4}));
  EXPECT_EQ(rows->shard_dim, 0);
  EXPECT_EQ(rows->shard_offset, 2);
  EXPECT_EQ(columns->shape, (Shape{6, 2}));
  EXPECT_EQ(columns->shard_dim, 1);
  EXPECT_EQ(columns->shard_offset, 1);
  EXPECT_EQ(whole->shape, (Shape{6, 4}));
  EXPECT_EQ(whole->shard_dim, -1);
  EXPECT_EQ(plain->full_shape, (Shape{5}));
  EXPECT_EQ(plain->shard_dim, -1);
  EXPECT_EQ(params.numel(), 12 + 12 + 24 + 5);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        params.declare("past_end", {6, 4}, ParamRole::matrix, true, 0, {4, 3});
      },
      {"past_end", "[4, 7)", "[6, 4]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        params.declare("no_dim", {6, 4}, ParamRole::matrix, true, 2, {0, 1});
      },
      {"no_dim", "dimension 2"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        params.declare("empty", {6, 4}, ParamRole::matrix, true, 0, {1, 0});
      },
      {"empty"}));
}

TEST(TensorParallelLayout, CopiesShardsOutOfAndIntoFullTensors) {
  Tensor full = Tensor::empty({2, 5, 3}, DType::f64);
  for (int64_t i = 0; i < full.numel(); ++i) full.data<double>()[i] = double(i);
  Tensor middle = Tensor::empty({2, 2, 3}, DType::f64);
  copy_from_full(full, 1, {2, 2}, middle);
  // element [a, b, c] of the shard is element [a, b + 2, c] of full: 15a + 3(b + 2) + c
  for (int64_t a = 0; a < 2; ++a) {
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(middle.data<double>()[a * 6 + b * 3 + c], 15 * a + 3 * (b + 2) + c);
    }
  }
  Tensor rebuilt = Tensor::zeros({2, 5, 3}, DType::f64);
  for (ShardRange r : {ShardRange{0, 2}, ShardRange{2, 2}, ShardRange{4, 1}}) {
    Tensor part = Tensor::empty({2, r.size, 3}, DType::f64);
    copy_from_full(full, 1, r, part);
    copy_into_full(part, 1, r, rebuilt);
  }
  EXPECT_EQ(std::memcmp(rebuilt.raw(), full.raw(), full.nbytes()), 0);
  EXPECT_TRUE(throws_invalid_argument([&] { copy_from_full(full, 1, {4, 2}, middle); }, {"copy_from_full", "[4, 6)"}));
  EXPECT_TRUE(throws_invalid_argument([&] { copy_from_full(full, 0, {0, 1}, middle); }, {"copy_from_full", "shard"}));
}

TEST(TensorParallelLayout, ShardwiseInitialisationReproducesTheFullDraw) {
  for (int dim : {0, 1}) {
    ParameterSet whole_set(DType::f32);
    Parameter* whole = whole_set.declare("w", {6, 4}, ParamRole::matrix, true);
    whole_set.finalize();
    Rng whole_rng(5);
    init_normal(*whole, whole_rng, 0.5);
    const int64_t extent = whole->full_shape[static_cast<size_t>(dim)];
    for (int rank = 0; rank < 2; ++rank) {
      ParameterSet set(DType::f32);
      const ShardRange range = TensorParallel{nullptr, rank, 2}.split(extent, "test");
      Parameter* p = set.declare("w", {6, 4}, ParamRole::matrix, true, dim, range);
      set.finalize();
      Rng rng(5);
      init_normal(*p, rng, 0.5);
      EXPECT_EQ(rng.state(), whole_rng.state()) << "the draw consumes the same randomness";
      Tensor expected = Tensor::empty(p->shape, DType::f32);
      copy_from_full(whole->value, dim, range, expected);
      EXPECT_EQ(std::memcmp(expected.raw(), p->value.raw(), expected.nbytes()), 0) << "dim " << dim << " rank " << rank;
    }
  }
}

TEST(TensorParallelLayout, AModelWithoutTensorParallelismHoldsEverythingWhole) {
  ModelConfig c;
  c.d_model = 8;
  c.layers = 2;
  c.vocab = 11;
  c.mixer = "kda";
  c.hybrid = "[1]";
  c.attention_layers = {1};
  c.mixer_config<DeltaRuleConfig>("kda").heads = 2;
  c.mixer_config<AttentionConfig>("attention").heads = 2;
  const Model model(c, DType::f32, /*allocate=*/false);
  EXPECT_EQ(model.tensor_parallel().size, 1);
  for (const Parameter& p : model.params().params()) {
    EXPECT_EQ(p.shard_dim, -1) << p.name;
    EXPECT_EQ(p.shape, p.full_shape) << p.name;
    EXPECT_FALSE(p.partial_grad) << p.name;
  }
}

}  // namespace
}  // namespace linea
