// Every routing variant (CLER, CLER-H, CLVR) of every delta-rule mixer trains on the CPU: 20 steps
// of a tiny 3:1 hybrid (tests/testing/routing_training.h) on the default corpus (the embedded
// dictionary, vocabulary 4096) with Muon (the routing matrices W_E, W_V get Muon, λ AdamW); the
// loss starts near ln(4096) and falls. And resuming: a checkpoint written without routing resumes
// into a routed model only with model.routing.resume_unrouted (the new tensors at zero, so the
// first resumed step's loss is the unrouted run's exactly); a routed run resumes bit-exactly.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>

#include "tests/testing/json_lines.h"
#include "tests/testing/routing_training.h"
#include "tests/testing/synthetic_shards.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/train_in_process.h"
#include "worker/run_config.h"
#include "worker/trainer.h"

namespace linea {
namespace {

struct TrainCase {
  std::string mixer, kind;
};

class RoutingTraining : public ::testing::TestWithParam<TrainCase> {};

TEST_P(RoutingTraining, LossFallsOnTheDefaultCorpus) {
  const TrainCase c = GetParam();
  testing::TempDir dir;
  const std::string text =
      testing::default_corpus_config({testing::routed_model(c.mixer, c.kind, 4096), "muon", "1e-2", 3, 20, 4});
  const auto lines = testing::train_metrics(text, dir.path(), "t");
  ASSERT_EQ(lines.size(), 20u);
  testing::expect_loss_falls(lines, 0.5, "[routing training] " + c.mixer + " " + c.kind);
}

std::vector<TrainCase> all_cases() {
  std::vector<TrainCase> cases;
  for (const char* mixer : {"deltanet", "gdn", "kda", "gdn2"}) {
    for (const std::string& kind : testing::routing_kinds()) cases.push_back({mixer, kind});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EveryMixer, RoutingTraining, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) { return info.param.mixer + "_" + info.param.kind; });

// A routed or unrouted run of the tiny model on synthetic shards, 20 steps, a checkpoint every 5.
class RoutingResume : public ::testing::Test {
 protected:
  void SetUp() override { data_ = testing::make_synthetic_data(dir_.path() / "data"); }

  RunConfig config(const std::string& run, const std::string& kind, std::vector<std::string> overrides = {}) {
    const std::string text = "device = \"cpu\"\n[run]\nname = \"r\"\n" + testing::routed_model("gdn", kind, 64) +
                             R"([optimizer]
kind = "muon"
lr = 3e-3
warmup_steps = 2
[train]
steps = 20
batch_seqs = 4
seq_len = 32
eval_every = 0
checkpoint_every = 5
threads = 1
[data]
vocab_size = 64
eos_id = 0
)";
    overrides.push_back("run.dir=" + (dir_.path() / run).string());
    overrides.push_back("data.path=" + data_);
    return parse_run_config(text, "r.toml", overrides);
  }
  TrainSummary run(const RunConfig& c) {
    std::ostringstream log;
    TrainSummary s = train(c, log);
    log_ = log.str();
    return s;
  }
  std::vector<nlohmann::json> metrics(const std::string& run) {
    return testing::json_lines(dir_.path() / run / "r" / "metrics.jsonl");
  }
  void copy(const std::string& from, const std::string& to) {
    std::filesystem::copy(dir_.path() / from, dir_.path() / to, std::filesystem::copy_options::recursive);
  }

  testing::TempDir dir_;
  std::string data_, log_;
};

TEST_F(RoutingResume, UnroutedCheckpointResumesOnlyWhenAsked) {
  run(config("plain", "none", {"train.stop_at=10"}));
  copy("plain", "refused");
  copy("plain", "asked");
  try {
    run(config("refused", "clvr"));
    ADD_FAILURE() << "a checkpoint without routing resumed into a routed model unasked";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("model.routing.resume_unrouted"), std::string::npos) << e.what();
  }
  const TrainSummary asked = run(config("asked", "clvr", {"model.routing.resume_unrouted=true"}));
  EXPECT_EQ(asked.start_step, 10);
  EXPECT_TRUE(asked.complete);
  EXPECT_NE(log_.find("resume_unrouted"), std::string::npos) << log_;
  run(config("plain", "none"));  // the unrouted run, continued
  const auto plain = metrics("plain"), routed = metrics("asked");
  ASSERT_EQ(plain.size(), 20u);
  ASSERT_EQ(routed.size(), 20u);
  // Step 11 runs the new routing tensors at zero: the baseline's loss exactly; then they learn.
  EXPECT_EQ(routed[10]["step"], 11);
  EXPECT_EQ(routed[10]["loss"], plain[10]["loss"]);
  EXPECT_NE(routed[19]["loss"], plain[19]["loss"]);
}

TEST_F(RoutingResume, RoutedRunResumesBitExactly) {
  for (const std::string& kind : testing::routing_kinds()) {
    run(config(kind + "_whole", kind));
    run(config(kind + "_split", kind, {"train.stop_at=10"}));
    run(config(kind + "_split", kind));
    const auto whole = metrics(kind + "_whole"), split = metrics(kind + "_split");
    ASSERT_EQ(whole.size(), split.size());
    for (size_t i = 0; i < whole.size(); ++i) EXPECT_EQ(whole[i]["loss"], split[i]["loss"]) << kind << " line " << i;
  }
}

}  // namespace
}  // namespace linea
