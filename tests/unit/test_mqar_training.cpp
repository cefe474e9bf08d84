// MQAR as a training task (data.path = "mqar:...", data/mqar_batches.h) through the real trainer:
// every evaluation logs val_acc (the argmax at the query positions, worker/target_accuracy.h), an
// MQAR run resumes from its checkpoint on exactly the next batch (the same losses as an unbroken
// run), and a 2-layer GDN and a 2-layer softmax attention model at d_model 128 learn it to ≥ 90%
// at a reduced setting (64 tokens, 4 pairs, vocabulary 64: configs/mqar-gdn-cpu.toml at 600 steps,
// about 35 s on one core; attention at 64 sequences a step without the MLP, 400 steps, 54 s on the
// loaded 2-core machine).
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "tests/testing/temp_dir.h"
#include "worker/run_config.h"
#include "worker/trainer.h"

namespace linea {
namespace {

std::string mqar_config(const std::string& dir, const std::string& mixer, int64_t steps) {
  return "device = \"cpu\"\n[run]\nname = \"mqar\"\ndir = \"" + dir +
         "\"\n[model]\nd_model = 128\nlayers = 2\nvocab = 64\n" + "mixer = \"" + mixer +
         "\"\ntie_embeddings = true\n[model.linear]\nheads = 2\nd_k = 64\nd_v = 64\n" +
         "[optimizer]\nkind = \"adamw\"\nlr = 1e-3\nweight_decay = 0.1\nwarmup_steps = 2\nlr_min_ratio = 0.1\n" +
         "[train]\nsteps = " + std::to_string(steps) + "\nbatch_seqs = 16\nseq_len = 64\nseed = 1\neval_every = 100\n" +
         "eval_batches = 4\ncheckpoint_every = 100000\n[data]\npath = \"mqar:vocab=64,pairs=4\"\n";
}

TEST(MqarTraining, LogsQueryAccuracyFromTheLogits) {
  testing::TempDir dir;
  const RunConfig config =
      parse_run_config(mqar_config(dir.path().string(), "gdn", 4), "mqar.toml",
                       {"train.eval_every=2", "model.d_model=32", "model.linear.d_k=16", "model.linear.d_v=16"});
  std::vector<double> acc, val_loss;
  TrainOptions options;
  options.on_step = [&](const nlohmann::json& m) {
    if (m.contains("val_acc")) acc.push_back(m["val_acc"].get<double>());
    if (m.contains("val_loss")) val_loss.push_back(m["val_loss"].get<double>());
  };
  std::ostringstream log;
  train(config, log, options);
  ASSERT_EQ(acc.size(), 2u);  // steps 2 and 4
  for (double a : acc) {
    // 4 val batches × 16 sequences × 4 queries: a multiple of 1/256
    EXPECT_GE(a, 0.0);
    EXPECT_LE(a, 1.0);
    EXPECT_DOUBLE_EQ(a * 256, std::round(a * 256));
  }
  EXPECT_NE(log.str().find("val_acc"), std::string::npos);
}

TEST(MqarTraining, ResumesOnTheNextBatch) {
  testing::TempDir dir;
  auto losses = [&](const std::string& name, std::vector<std::string> overrides) {
    overrides.push_back("run.name=" + name);
    const RunConfig config = parse_run_config(mqar_config(dir.path().string(), "gdn", 6), "mqar.toml", overrides);
    std::vector<double> out;
    TrainOptions options;
    options.on_step = [&](const nlohmann::json& m) { out.push_back(m["loss"].get<double>()); };
    std::ostringstream log;
    train(config, log, options);
    return out;
  };
  const std::vector<double> whole = losses("whole", {"model.d_model=32", "model.linear.d_k=16", "model.linear.d_v=16"});
  const std::vector<std::string> small = {"model.d_model=32", "model.linear.d_k=16", "model.linear.d_v=16",
                                          "train.checkpoint_every=3"};
  std::vector<std::string> first = small;
  first.push_back("train.stop_at=3");
  const std::vector<double> head = losses("split", first);
  const std::vector<double> tail = losses("split", small);
  ASSERT_EQ(head.size(), 3u);
  ASSERT_EQ(tail.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(head[i], whole[i]);
    EXPECT_EQ(tail[i], whole[3 + i]) << "step " << 4 + i;
  }
}

// Trains `config` to its end and expects the last val_acc to be at least 0.9.
void expect_learns_recall(const RunConfig& config) {
  double last_acc = -1;
  TrainOptions options;
  options.on_step = [&](const nlohmann::json& m) {
    if (m.contains("val_acc")) last_acc = m["val_acc"].get<double>();
  };
  std::ostringstream log;
  const TrainSummary summary = train(config, log, options);
  EXPECT_TRUE(summary.complete);
  EXPECT_GE(last_acc, 0.9) << log.str();
  ::testing::Test::RecordProperty("val_acc", std::to_string(last_acc));
}

TEST(MqarTraining, GatedDeltaNetLearnsRecall) {
  testing::TempDir dir;
  const RunConfig config =
      parse_run_config(mqar_config(dir.path().string(), "gdn", 600), "mqar.toml", {"optimizer.warmup_steps=20"});
  expect_learns_recall(config);
}

// Softmax attention needs more sequences a step, or a lower lr, than the GDN: at 16 (64 answers a
// step) and lr 1e-3 or 3e-3 it stays near chance, val_acc 0.23–0.37 through 2000 steps (it learns
// which four values are present, not which one belongs to the key); lr 3e-4 gets there by step
// 1200. At 64 sequences a step and lr 1e-3 it passes 0.9 by step 300
// (configs/mqar-attention-cpu.toml, with the MLP; docs/studies.md). Here without the MLP, which
// takes most of the time of a step.
TEST(MqarTraining, AttentionLearnsRecallAtSixtyFourSequencesAStep) {
  testing::TempDir dir;
  const RunConfig config = parse_run_config(mqar_config(dir.path().string(), "attention", 400), "mqar.toml",
                                            {"optimizer.warmup_steps=20", "model.mlp=false", "model.attention.heads=2",
                                             "model.attention.head_dim=64", "train.batch_seqs=64"});
  expect_learns_recall(config);
}

}  // namespace
}  // namespace linea
