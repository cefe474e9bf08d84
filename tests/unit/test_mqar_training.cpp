// MQAR as a training task (data.path = "mqar:...", data/mqar_batches.h) through the real trainer:
// every evaluation logs val_acc (the argmax at the query positions, worker/target_accuracy.h), and an
// MQAR run resumes from its checkpoint on exactly the next batch (the same losses as an unbroken
// run). That the models learn the task is tests/learning/test_mqar_recall.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "tests/testing/mqar_job.h"
#include "tests/testing/temp_dir.h"
#include "worker/run_config.h"
#include "worker/trainer.h"

namespace linea {
namespace {

TEST(MqarTraining, LogsQueryAccuracyFromTheLogits) {
  testing::TempDir dir;
  const RunConfig config =
      parse_run_config(testing::mqar_config(dir.path().string(), "gdn", 4), "mqar.toml",
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
    const RunConfig config = parse_run_config(testing::mqar_config(dir.path().string(), "gdn", 6), "mqar.toml", overrides);
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

}  // namespace
}  // namespace linea
