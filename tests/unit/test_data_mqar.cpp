// MQAR as data (data/mqar.h, data/mqar_batches.h): Zoology's layout (pairs, then each key asked
// once with its value as the target), determinism by (seed, index), the global order the same for
// any ranks × micro-batches, resume from a saved position, and data.path parsing errors.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "data/mqar.h"
#include "data/mqar_batches.h"
#include "tests/testing/error_of.h"

namespace linea::data {
namespace {

using testing::error_of;

TEST(DataMqar, SequencesHaveZoologysLayout) {
  const MqarConfig c{512, 256, 16, 0.01};
  for (uint64_t index = 0; index < 20; ++index) {
    const MqarSequence s = mqar_sequence(c, 5, index);
    ASSERT_EQ(s.inputs.size(), 256u);
    std::map<int32_t, int32_t> pairs;
    for (int i = 0; i < 16; ++i) {
      const int32_t k = s.inputs[size_t(2 * i)], v = s.inputs[size_t(2 * i + 1)];
      EXPECT_GE(k, 1);
      EXPECT_LT(k, 256);
      EXPECT_GE(v, 256);
      EXPECT_LT(v, 512);
      EXPECT_TRUE(pairs.emplace(k, v).second) << "keys are distinct";
    }
    ASSERT_EQ(s.query_positions.size(), 16u);
    std::set<int32_t> asked;
    int64_t targets = 0;
    for (size_t t = 0; t < s.targets.size(); ++t) targets += s.targets[t] >= 0;
    EXPECT_EQ(targets, 16);
    for (int64_t t : s.query_positions) {
      EXPECT_GE(t, 32);
      EXPECT_EQ(t % 2, 0);
      EXPECT_EQ(s.targets[size_t(t)], pairs.at(s.inputs[size_t(t)]));
      asked.insert(s.inputs[size_t(t)]);
    }
    EXPECT_EQ(asked.size(), 16u) << "each key asked once";
    for (int32_t id : s.inputs) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, 512);
    }
  }
  EXPECT_EQ(mqar_sequence(c, 5, 3).inputs, mqar_sequence(c, 5, 3).inputs);
  EXPECT_NE(mqar_sequence(c, 5, 3).inputs, mqar_sequence(c, 6, 3).inputs);
}

TEST(DataMqar, QueriesFollowThePowerLawNearThePairs) {
  // p(slot g) ∝ (g + 1)^(a − 1): with a = 0.01 the first slot of 112 is the likeliest by far.
  const MqarConfig c{512, 256, 1, 0.01};
  int first = 0;
  for (uint64_t i = 0; i < 2000; ++i) first += mqar_sequence(c, 1, i).query_positions[0] == 2;
  double h = 0;
  for (int g = 1; g <= 127; ++g) h += std::pow(double(g), -0.99);
  EXPECT_NEAR(first / 2000.0, 1.0 / h, 0.03);
}

TEST(DataMqar, TheGlobalOrderIsTheSameForAnyRanksAndMicroBatches) {
  const MqarConfig c{256, 64, 4, 0.01};
  auto step_tokens = [&](int world, int64_t micro, int64_t steps) {
    std::vector<int32_t> tokens;
    std::vector<std::unique_ptr<MqarBatches>> ranks;
    for (int r = 0; r < world; ++r) {
      LoaderConfig l;
      l.seq_len = 64;
      l.global_batch_seqs = 8;
      l.micro_batch_seqs = micro;
      l.rank = r;
      l.world = world;
      l.seed = 9;
      ranks.push_back(std::make_unique<MqarBatches>(c, l));
    }
    for (int64_t s = 0; s < steps; ++s) {
      for (auto& b : ranks) {
        for (int64_t m = 0; m < b->micro_steps_per_step(); ++m) {
          const TokenBatch batch = b->next();
          EXPECT_EQ(batch.layout.num_seqs(), micro);
          tokens.insert(tokens.end(), batch.inputs.begin(), batch.inputs.end());
          tokens.insert(tokens.end(), batch.targets.begin(), batch.targets.end());
        }
      }
    }
    return tokens;
  };
  // Tokens and targets interleave per micro-batch, so compare per-sequence content instead: the
  // one-rank, whole-batch stream against 2 ranks × 2 micro-batches of 2.
  auto sequences = [](const std::vector<int32_t>& flat, int64_t micro) {
    std::vector<std::vector<int32_t>> out;
    for (size_t at = 0; at < flat.size(); at += size_t(2 * micro * 64)) {
      for (int64_t j = 0; j < micro; ++j) {
        std::vector<int32_t> seq(flat.begin() + int64_t(at) + j * 64, flat.begin() + int64_t(at) + (j + 1) * 64);
        const auto t = flat.begin() + int64_t(at) + micro * 64 + j * 64;
        seq.insert(seq.end(), t, t + 64);
        out.push_back(seq);
      }
    }
    return out;
  };
  EXPECT_EQ(sequences(step_tokens(1, 8, 3), 8), sequences(step_tokens(2, 2, 3), 2));
}

TEST(DataMqar, ResumesFromASavedPosition) {
  const MqarConfig c{256, 64, 4, 0.01};
  LoaderConfig l;
  l.seq_len = 64;
  l.global_batch_seqs = 4;
  l.micro_batch_seqs = 2;
  l.seed = 3;
  MqarBatches a(c, l);
  for (int i = 0; i < 5; ++i) a.next();
  const nlohmann::json saved = a.position();
  const TokenBatch expected = a.next();
  MqarBatches b(c, l);
  b.seek(saved, "ckpt");
  EXPECT_EQ(b.next().inputs, expected.inputs);
  LoaderConfig other = l;
  other.seed = 4;
  MqarBatches c2(c, other);
  EXPECT_NE(error_of([&] { c2.seek(saved, "ckpt"); }).find("ckpt: data position: seed 3 differs"), std::string::npos);
}

TEST(DataMqar, ValidationIsItsOwnFixedStream) {
  const MqarConfig c{256, 64, 4, 0.01};
  LoaderConfig l;
  l.seq_len = 64;
  l.global_batch_seqs = 4;
  l.micro_batch_seqs = 4;
  l.seed = 3;
  MqarValidation val(c, l, 2);
  TokenBatch batch;
  std::vector<int32_t> first;
  int steps = 0;
  while (val.next(batch)) {
    if (steps++ == 0) first = batch.inputs;
  }
  EXPECT_EQ(steps, 2);
  val.reset();
  ASSERT_TRUE(val.next(batch));
  EXPECT_EQ(batch.inputs, first);
  MqarBatches train(c, l);
  EXPECT_NE(train.next().inputs, first);
}

TEST(DataMqar, ParsesDataPathsAndNamesTheBadKey) {
  const MqarConfig c = parse_mqar_path("mqar:vocab=8192,pairs=16", 256, "run.toml");
  EXPECT_EQ(c.vocab, 8192);
  EXPECT_EQ(c.seq_len, 256);
  EXPECT_EQ(c.pairs, 16);
  EXPECT_EQ(parse_mqar_path("mqar:seq_len=128,pairs=8,vocab=300,power_a=0.5", 256, "x").power_a, 0.5);
  EXPECT_NE(error_of([] { parse_mqar_path("mqar:vocab=8192,keys=3", 256, "run.toml"); }).find("unknown key \"keys\""),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_mqar_path("mqar:vocab=lots", 256, "run.toml"); }).find("vocab: expected a number"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_mqar_path("mqar:pairs=65", 256, "run.toml");
            }).find("mqar pairs: expected 1 <= pairs <= seq_len / 4 = 64"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_mqar_path("mqar:vocab=20", 256, "run.toml"); }).find("mqar vocab"), std::string::npos);
  EXPECT_TRUE(is_mqar_path("mqar:vocab=8"));
  EXPECT_FALSE(is_mqar_path("data/mqar"));
}

}  // namespace
}  // namespace linea::data
