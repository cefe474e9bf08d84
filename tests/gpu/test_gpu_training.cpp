// The trainer end to end on the GPU (device = "cuda"), on synthetic shards with a small GDN +
// attention hybrid:
// - 50 steps in bf16 (f32 master weights) follow the CPU f32 run's loss curve: every step's loss
//   within 0.1 and the final loss within 0.05 of the CPU's (bf16 rounds the activations and compute
//   weights to 8 significant bits, so the two runs drift apart slowly; both learn the data);
// - stop_at + resume on the GPU gives the uninterrupted run's metrics (the checkpoint holds the f32
//   masters and optimizer state exactly; losses agree to 1e-6);
// - the summary names the device, the precision and the peak GPU memory.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/gpu/gpu_test.h"
#include "tests/testing/json_lines.h"
#include "tests/testing/synthetic_shards.h"
#include "tests/testing/temp_dir.h"
#include "worker/run_config.h"
#include "worker/trainer.h"

namespace linea {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string hybrid_config(const std::string& data_dir) {
  return R"([run]
name = "hybrid"
[model]
d_model = 64
layers = 2
vocab = 64
mixer = "gdn"
hybrid = "1:1"
tie_embeddings = false
mlp_hidden = 128
[model.linear]
heads = 2
d_k = 32
d_v = 32
[model.attention]
heads = 2
head_dim = 64
[optimizer]
kind = "adamw"
lr = 3e-3
warmup_steps = 5
[train]
steps = 50
batch_seqs = 8
micro_batch_seqs = 4
seq_len = 64
eval_every = 25
eval_batches = 2
checkpoint_every = 10
threads = 2
[data]
vocab_size = 64
eos_id = 0
path = ")" +
         data_dir + "\"\n";
}

class GpuTraining : public testing::GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    data_dir_ = testing::make_synthetic_data(tmp_.path() / "data");
  }

  TrainSummary run(const std::string& run_dir, std::vector<std::string> overrides) {
    overrides.push_back("run.dir=" + (tmp_.path() / run_dir).string());
    std::ostringstream log;
    TrainSummary s = train(parse_run_config(hybrid_config(data_dir_), "hybrid.toml", overrides), log);
    last_log_ = log.str();
    return s;
  }

  std::vector<json> metrics(const std::string& run_dir) {
    return testing::json_lines(tmp_.path() / run_dir / "hybrid" / "metrics.jsonl");
  }

  testing::TempDir tmp_;
  std::string data_dir_;
  std::string last_log_;
};

TEST_F(GpuTraining, Bf16FollowsTheCpuF32LossCurve) {
  const TrainSummary cpu = run("cpu", {"device=cpu"});
  const TrainSummary gpu = run("gpu", {"device=cuda"});
  EXPECT_EQ(gpu.device, "cuda");
  EXPECT_EQ(gpu.precision, "bf16");
  EXPECT_GT(gpu.peak_device_bytes, 0);
  EXPECT_NE(last_log_.find("bf16 (f32 master weights)"), std::string::npos) << last_log_;
  const auto a = metrics("cpu"), b = metrics("gpu");
  ASSERT_EQ(a.size(), 50u);
  ASSERT_EQ(b.size(), 50u);
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double delta = std::abs(a[i]["loss"].get<double>() - b[i]["loss"].get<double>());
    worst = std::max(worst, delta);
    EXPECT_LT(delta, 0.1) << "step " << i + 1;
  }
  EXPECT_NEAR(gpu.last_loss, cpu.last_loss, 0.05);
  EXPECT_NEAR(gpu.last_val_loss, cpu.last_val_loss, 0.05);
  EXPECT_LT(gpu.last_loss, a.front()["loss"].get<double>() - 1.0);  // it learns
  std::printf("cpu f32 final loss %.5f, gpu bf16 %.5f, largest per-step |Δloss| %.4f, peak GPU memory %.1f MiB\n",
              cpu.last_loss, gpu.last_loss, worst, double(gpu.peak_device_bytes) / (1 << 20));
}

TEST_F(GpuTraining, StopAtThenResumeMatchesTheUninterruptedRun) {
  const std::vector<std::string> shorter = {"device=cuda", "train.steps=20", "train.eval_every=10"};
  run("whole", shorter);
  std::vector<std::string> stop = shorter;
  stop.push_back("train.stop_at=10");
  EXPECT_FALSE(run("split", stop).complete);
  const TrainSummary resumed = run("split", shorter);
  EXPECT_EQ(resumed.start_step, 10) << last_log_;
  EXPECT_TRUE(resumed.complete);
  const auto a = metrics("whole"), b = metrics("split");
  ASSERT_EQ(a.size(), b.size());
  bool exact = true;
  for (size_t i = 0; i < a.size(); ++i) {
    for (const char* key : {"loss", "grad_norm", "val_loss"}) {
      ASSERT_EQ(a[i].contains(key), b[i].contains(key)) << key << " at line " << i;
      if (!a[i].contains(key)) continue;
      EXPECT_NEAR(a[i][key].get<double>(), b[i][key].get<double>(), 1e-6) << key << " at line " << i;
      exact = exact && a[i][key] == b[i][key];
    }
  }
  std::printf("resumed run %s the uninterrupted one\n", exact ? "is bit-identical to" : "differs slightly from");
}

}  // namespace
}  // namespace linea
