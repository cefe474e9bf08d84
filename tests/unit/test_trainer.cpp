// The main job end to end on a tiny model and synthetic shards: resume is bit-exact, a damaged
// newest checkpoint falls back to the previous one, a signal stops with a checkpoint, and bad
// configurations fail before any work with the key named.
#include <gtest/gtest.h>
#include <sched.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "checkpoint/checkpoint_directory.h"
#include "data/atomic_file.h"
#include "inference/hf_checkpoint.h"
#include "kernels/device_memory.h"
#include "model/model.h"
#include "tests/testing/damaged_checkpoint.h"
#include "tests/testing/json_lines.h"
#include "tests/testing/synthetic_shards.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tiny_model.h"
#include "worker/run_config.h"
#include "worker/stop_signal.h"
#include "worker/trainer.h"

namespace linea {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kVocab = testing::kSyntheticVocab;

std::string make_data(const fs::path& dir) { return testing::make_synthetic_data(dir); }

std::string tiny_config(const fs::path& data_dir) {
  return "device = \"cpu\"\n[run]\nname = \"tiny\"\n" + testing::tiny_hybrid_model(64, "tie_embeddings = false\n") +
         R"([optimizer]
kind = "muon"
lr = 1e-2
warmup_steps = 3
[train]
steps = 30
batch_seqs = 4
micro_batch_seqs = 2
seq_len = 32
eval_every = 10
eval_batches = 2
checkpoint_every = 5
keep_checkpoints = 3
threads = 1
[data]
vocab_size = 64
eos_id = 0
path = ")" +
         data_dir.string() + "\"\n";
}

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override { data_dir_ = make_data(tmp_.path() / "data"); }

  RunConfig config(const std::string& run_dir, std::vector<std::string> overrides = {}) {
    overrides.push_back("run.dir=" + (tmp_.path() / run_dir).string());
    return parse_run_config(tiny_config(data_dir_), "tiny.toml", overrides);
  }

  TrainSummary run(const RunConfig& c) {
    std::ostringstream log;
    TrainSummary s = train(c, log);
    last_log_ = log.str();
    return s;
  }

  std::vector<json> metrics(const std::string& run_dir) {
    return testing::json_lines(tmp_.path() / run_dir / "tiny" / "metrics.jsonl");
  }

  // Everything but the timing fields, which differ from run to run.
  static void expect_same_trajectory(const std::vector<json>& a, const std::vector<json>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      for (const char* key : {"step", "loss", "lr", "grad_norm", "tokens", "val_loss"}) {
        ASSERT_EQ(a[i].contains(key), b[i].contains(key)) << key << " at line " << i;
        if (a[i].contains(key)) {
          EXPECT_EQ(a[i][key], b[i][key]) << key << " at line " << i;
        }
      }
    }
  }

  testing::TempDir tmp_;
  std::string data_dir_;
  std::string last_log_;
};

TEST_F(TrainerTest, LearnsAndWritesMetrics) {
  const TrainSummary s = run(config("a"));
  EXPECT_NE(last_log_.find("; set up in "), std::string::npos) << last_log_;
  EXPECT_TRUE(s.complete);
  EXPECT_EQ(s.end_step, 30);
  EXPECT_EQ(s.tokens, 30 * 4 * 32);
  const auto lines = metrics("a");
  ASSERT_EQ(lines.size(), 30u);
  EXPECT_NEAR(lines.front()["loss"].get<double>(), std::log(double(kVocab)), 0.1);
  EXPECT_LT(lines.back()["loss"].get<double>(), lines.front()["loss"].get<double>() - 1.0);
  for (const json& l : lines) {
    for (const char* key : {"step", "loss", "lr", "grad_norm", "tokens_per_s"}) {
      EXPECT_TRUE(l.contains(key)) << key;
    }
    EXPECT_EQ(l.contains("val_loss"), l["step"].get<int64_t>() % 10 == 0);
  }
  EXPECT_TRUE(fs::exists(tmp_.path() / "a" / "tiny" / "config.toml"));
  // keep_checkpoints = 3: steps 20, 25, 30
  const auto kept = list_committed_checkpoints(tmp_.path() / "a" / "tiny" / "checkpoints");
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept.back().step, 30);
  // Running again finds the run complete and does nothing.
  const TrainSummary again = run(config("a"));
  EXPECT_TRUE(again.complete);
  EXPECT_EQ(again.start_step, 30);
  EXPECT_EQ(metrics("a").size(), 30u);
}

// train.checkpoint_every = -1 (benchmarks): the run trains and logs every step and writes no
// checkpoint, not even at the end; stop_at, which needs one, is refused.
TEST_F(TrainerTest, CheckpointEveryMinusOneWritesNone) {
  const TrainSummary s = run(config("none", {"train.checkpoint_every=-1"}));
  EXPECT_TRUE(s.complete);
  EXPECT_EQ(metrics("none").size(), 30u);
  EXPECT_TRUE(list_committed_checkpoints(tmp_.path() / "none" / "tiny" / "checkpoints").empty());
  try {
    config("none", {"train.checkpoint_every=-1", "train.stop_at=10"});
    ADD_FAILURE() << "stop_at without checkpoints was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("train.stop_at"), std::string::npos) << e.what();
  }
}

TEST_F(TrainerTest, StopAtThenResumeIsBitExact) {
  run(config("whole"));
  const TrainSummary first = run(config("split", {"train.stop_at=15"}));
  EXPECT_FALSE(first.complete);
  EXPECT_EQ(first.end_step, 15);
  const TrainSummary second = run(config("split"));
  EXPECT_EQ(second.start_step, 15);
  EXPECT_TRUE(second.complete);
  expect_same_trajectory(metrics("whole"), metrics("split"));
}

TEST_F(TrainerTest, DamagedNewestCheckpointFallsBackToThePrevious) {
  run(config("whole"));
  run(config("split", {"train.stop_at=20"}));
  const fs::path newest = tmp_.path() / "split" / "tiny" / "checkpoints" / checkpoint_directory_name(20);
  const fs::path data_file = newest / "rank-00000.h5";
  ASSERT_TRUE(fs::exists(data_file));
  testing::flip_byte_near_end(data_file);
  const TrainSummary resumed = run(config("split"));
  EXPECT_EQ(resumed.start_step, 15) << last_log_;
  EXPECT_TRUE(resumed.complete);
  expect_same_trajectory(metrics("whole"), metrics("split"));
}

// A checkpoint a resume skipped as damaged is set aside: training went on from an older one, and
// metrics.jsonl was cut back to that one's step, so the skipped one must never be resumed from
// later, even if it reads well by then (the chaos soak flipped the same byte twice, a flaky disk
// could fail one read): that resume would keep only the lines logged so far and leave a gap
// between them and its step.
TEST_F(TrainerTest, ADamagedCheckpointSkippedOnceIsNeverResumedFrom) {
  run(config("whole"));
  run(config("split", {"train.stop_at=20"}));
  const fs::path checkpoints = tmp_.path() / "split" / "tiny" / "checkpoints";
  testing::damage_checkpoint(checkpoints / checkpoint_directory_name(20));
  const TrainSummary fallback = run(config("split", {"train.stop_at=17"}));
  EXPECT_EQ(fallback.start_step, 15) << last_log_;
  EXPECT_NE(last_log_.find("set aside as " + (checkpoints / "step-000000020.damaged").string()), std::string::npos)
      << last_log_;
  std::vector<int64_t> committed;
  for (const CommittedCheckpoint& c : list_committed_checkpoints(checkpoints)) committed.push_back(c.step);
  EXPECT_EQ(committed, (std::vector<int64_t>{10, 15, 17}));
  // The same byte flipped back: the checkpoint of step 20 reads well again, wherever it is now.
  const fs::path aside = checkpoints / "step-000000020.damaged";
  testing::damage_checkpoint(fs::exists(aside) ? aside : checkpoints / checkpoint_directory_name(20));
  const TrainSummary resumed = run(config("split"));
  EXPECT_EQ(resumed.start_step, 17) << last_log_;
  EXPECT_TRUE(resumed.complete);
  expect_same_trajectory(metrics("whole"), metrics("split"));
}

// Every committed checkpoint damaged: resume = "require" says so (not "no committed checkpoint");
// resume = "auto" starts again from step 0, says so, and keeps the old metrics.jsonl aside.
TEST_F(TrainerTest, EveryCheckpointDamagedIsSaidAndTheOldMetricsAreKept) {
  run(config("all", {"train.stop_at=15"}));
  const fs::path checkpoints = tmp_.path() / "all" / "tiny" / "checkpoints";
  for (int64_t step : {5, 10, 15}) testing::damage_checkpoint(checkpoints / checkpoint_directory_name(step));
  try {
    run(config("all", {"train.resume=require"}));
    ADD_FAILURE() << "resumed from damaged checkpoints";
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("every committed checkpoint is damaged (3: step-000000015, step-000000010, "
                           "step-000000005"),
              std::string::npos)
        << message;
  }
  const std::string old_metrics = data::read_file(tmp_.path() / "all" / "tiny" / "metrics.jsonl");
  const TrainSummary again = run(config("all", {"train.stop_at=3"}));
  EXPECT_EQ(again.start_step, 0);
  EXPECT_NE(last_log_.find("warning: every committed checkpoint is damaged"), std::string::npos) << last_log_;
  const fs::path aside = tmp_.path() / "all" / "tiny" / "metrics.jsonl.before-restart";
  EXPECT_NE(last_log_.find("the old metrics.jsonl is kept as " + aside.string()), std::string::npos) << last_log_;
  EXPECT_EQ(data::read_file(aside), old_metrics);
  EXPECT_EQ(metrics("all").size(), 3u);
}

// A resume under another configuration names the keys that differ.
TEST_F(TrainerTest, AChangedConfigurationNamesTheKeys) {
  run(config("changed", {"train.stop_at=5"}));
  run(config("changed", {"train.stop_at=10", "optimizer.lr=0.005"}));
  EXPECT_NE(last_log_.find("warning: the configuration differs from the one"), std::string::npos) << last_log_;
  EXPECT_NE(last_log_.find("\n  optimizer.lr: 0.01 → 0.005\n"), std::string::npos) << last_log_;
  EXPECT_NE(last_log_.find("\n  train.stop_at: 5 → 10"), std::string::npos) << last_log_;
}

// run.dir a file, data.path a file, run.name a number.
TEST_F(TrainerTest, PathsThatAreFilesAreNamedAndANumericNameIsAName) {
  const fs::path file = tmp_.path() / "a-file";
  std::ofstream(file) << "x";
  try {
    run(parse_run_config(tiny_config(data_dir_), "tiny.toml", {"run.dir=" + file.string()}));
    ADD_FAILURE() << "trained into a file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(
        std::string(e.what()).find("tiny.toml: run.dir = \"" + file.string() + "\": cannot create the run directory"),
        std::string::npos)
        << e.what();
  }
  try {
    run(config("d", {"data.path=" + file.string()}));
    ADD_FAILURE() << "read shards from a file";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(file.string() + " is not a directory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(config("n", {"run.name=123"}).name, "123");
}

TEST_F(TrainerTest, SignalStopsAfterTheStepWithACheckpoint) {
  run(config("whole"));
  install_stop_signal_handlers();
  std::raise(SIGTERM);
  const TrainSummary stopped = run(config("split"));
  clear_stop_signal();
  EXPECT_EQ(stopped.stop_signal, SIGTERM);
  EXPECT_EQ(stopped.end_step, 1);
  EXPECT_FALSE(stopped.complete);
  const TrainSummary resumed = run(config("split"));
  EXPECT_EQ(resumed.start_step, 1);
  expect_same_trajectory(metrics("whole"), metrics("split"));
}

TEST_F(TrainerTest, GradientAccumulationMatchesOneBigMicroBatch) {
  run(config("accumulated", {"train.steps=5", "train.eval_every=0"}));
  run(config("whole_batch", {"train.steps=5", "train.eval_every=0", "train.micro_batch_seqs=4"}));
  const auto a = metrics("accumulated"), b = metrics("whole_batch");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i]["loss"].get<double>(), b[i]["loss"].get<double>(), 1e-5);
    EXPECT_NEAR(a[i]["grad_norm"].get<double>(), b[i]["grad_norm"].get<double>(), 1e-4);
  }
}

// Each bad configuration fails at load, before a run directory exists, naming the key.
TEST_F(TrainerTest, BadConfigsNameTheKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train.stepz=3", "train.stepz"},
      {"train.steps=\"many\"", "train.steps"},
      {"train.steps=0", "train.steps"},
      {"optimizer.kind=sgd", "optimizer.kind"},
      {"model.hybrid=3:0", "model.hybrid"},
      {"model.attention.kv_heads=3", "model.attention"},
      {"train.micro_batch_seqs=3", "train.micro_batch_seqs"},
      {"optimizer.warmup_steps=100", "optimizer.warmup_steps"},
      {"device=tpu", "device"},
      {"train.precision=bf16", "train.precision"},  // tiny_config trains on the cpu
      {"train.precision=f16", "train.precision"},
  };
  for (const auto& [override_text, key] : cases) {
    try {
      config("bad", {override_text});
      ADD_FAILURE() << override_text << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << override_text << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("tiny.toml"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(fs::exists(tmp_.path() / "bad"));
}

TEST_F(TrainerTest, CpuOrAutoWithoutAGpuTrainsInF32) {
  if (cuda_device_available()) GTEST_SKIP() << "a CUDA device is visible: auto would pick it";
  const TrainSummary s = run(config("auto", {"device=auto", "train.steps=4", "train.eval_every=0"}));
  EXPECT_TRUE(s.complete);
  EXPECT_EQ(s.device, "cpu");
  EXPECT_EQ(s.precision, "f32");
  EXPECT_EQ(s.peak_device_bytes, 0);
  EXPECT_NE(last_log_.find("cpu f32"), std::string::npos) << last_log_;
}

TEST_F(TrainerTest, CudaWithoutAGpuIsAClearError) {
  if (cuda_device_available()) GTEST_SKIP() << "a CUDA device is visible";
  const auto expect_error = [&](const std::vector<std::string>& overrides, const std::string& key,
                                const std::string& reason) {
    try {
      run(config("no_gpu", overrides));
      ADD_FAILURE() << key << ": accepted";
    } catch (const std::invalid_argument& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("tiny.toml: " + key), std::string::npos) << message;
      EXPECT_NE(message.find(reason), std::string::npos) << message;
    }
  };
  expect_error({"device=cuda"}, "device", cuda_backend_built() ? "no CUDA device" : "no CUDA backend");
  expect_error({"device=auto", "train.precision=bf16"}, "train.precision", "needs a CUDA device");
  EXPECT_FALSE(fs::exists(tmp_.path() / "no_gpu" / "tiny" / "metrics.jsonl"));
}

TEST_F(TrainerTest, VocabularyTooSmallForTheDataIsRejected) {
  try {
    run(config("small_vocab", {"model.vocab=32"}));
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("model.vocab"), std::string::npos) << e.what();
  }
}

// model.init_from = "hf:DIR": the run starts from the weights of an fla / Hugging Face checkpoint.
// Exported from the model the seeded init would give, the run follows the seeded run bit for bit;
// exported from another seed's, it starts elsewhere.
TEST_F(TrainerTest, InitFromAnHfCheckpointStartsFromItsWeights) {
  const RunConfig seeded = config("seeded", {"train.steps=3", "train.eval_every=0"});
  for (const uint64_t seed : {seeded.train.seed, seeded.train.seed + 1}) {
    Model model(seeded.model);
    model.init_parameters(seed);
    inference::export_hf(model, tmp_.path() / ("hf" + std::to_string(seed)));
  }
  run(seeded);
  const std::string same = "hf:" + (tmp_.path() / ("hf" + std::to_string(seeded.train.seed))).string();
  const std::string other = "hf:" + (tmp_.path() / ("hf" + std::to_string(seeded.train.seed + 1))).string();
  run(config("same", {"train.steps=3", "train.eval_every=0", "model.init_from=" + same}));
  run(config("other", {"train.steps=3", "train.eval_every=0", "model.init_from=" + other}));
  expect_same_trajectory(metrics("seeded"), metrics("same"));
  EXPECT_NE(metrics("seeded").front()["loss"], metrics("other").front()["loss"]);
}

}  // namespace
}  // namespace linea
