// [eval] in the run config and the evaluation a training run does with it: the keys parsed and
// checked (an unknown task is an error naming eval.tasks), and TrainingEvaluation appending each
// result to RUN_DIR/eval.jsonl and its metrics to the step's metrics line. The evaluation leaves
// the training state as it was: the model's step arenas (their high water), gradients and weights
// after TrainingEvaluation::run; and a CPU run with [eval] every 6 steps logs the same losses, bit
// for bit, as the run without it (the CUDA run: tests/gpu/test_gpu_inference_commands.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "data/tokenizer.h"
#include "model/model.h"
#include "tests/testing/error_of.h"
#include "tests/testing/eval_run.h"
#include "tests/testing/fixtures.h"
#include "tests/testing/json_lines.h"
#include "tests/testing/kernel_test.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tiny_model.h"
#include "worker/run_config.h"
#include "worker/trainer.h"
#include "worker/training_evaluation.h"

namespace linea {
namespace {

constexpr const char* kConfig = R"(device = "cpu"
[model]
d_model = 16
layers = 1
vocab = 900
mixer = "attention"
[model.attention]
heads = 2
head_dim = 8
[eval]
tasks = ["arc_easy", "niah_single_1"]
every = 50
limit = 1
context_lengths = [512]
)";

// kConfig with its data sets in the fixtures.
RunConfig fixture_config() {
  return parse_run_config(kConfig, "run.toml",
                          {"eval.data_dir=\"" + (testing::fixture_dir() / "eval").string() + "\""});
}

// The evaluation of config's [eval] with the fixture tokenizer, writing into `dir`.
TrainingEvaluation fixture_evaluation(const RunConfig& config, const testing::TempDir& dir) {
  return TrainingEvaluation(
      config.eval,
      data::load_tokenizer(
          {"hf-tokenizer-json", (testing::fixture_dir() / "tokenizer" / "hf_bytelevel.json").string()}),
      dir.path());
}

TEST(TrainingEvaluation, ParsesEvalAndRunsItsTasks) {
  testing::TempDir dir;
  const RunConfig config = fixture_config();
  EXPECT_EQ(config.eval.tasks, (std::vector<std::string>{"arc_easy", "niah_single_1"}));
  EXPECT_EQ(config.eval.every, 50);
  EXPECT_EQ(config.eval.context_lengths, std::vector<int64_t>{512});
  EXPECT_NE(
      testing::error_of([] { parse_run_config(kConfig, "run.toml", {"eval.tasks=[\"nosuch\"]"}); }).find("eval.tasks"),
      std::string::npos);

  Model model(config.model);
  model.init_parameters(1);
  TrainingEvaluation evaluation = fixture_evaluation(config, dir);
  nlohmann::json line = {{"step", 50}};
  std::ostringstream log;
  evaluation.run(model, 50, line, log);
  EXPECT_TRUE(line.contains("eval/niah_single_1@512/score"));
  EXPECT_TRUE(line.contains("eval/niah_single_1@512/answer_nll_stderr"));
  EXPECT_TRUE(line.contains("eval/niah_single_1@512/answer_greedy"));
  EXPECT_TRUE(line.contains("eval/arc_easy/acc"));
  EXPECT_TRUE(line.contains("eval/arc_easy/acc_norm_stderr"));
  std::ifstream in(dir / "eval.jsonl");
  std::string first;
  ASSERT_TRUE(std::getline(in, first));
  EXPECT_EQ(nlohmann::json::parse(first)["task"], "arc_easy");
  EXPECT_EQ(nlohmann::json::parse(first)["step"], 50);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(TrainingEvaluation, LeavesTheStepArenasGradientsAndWeightsAsTheyWere) {
  testing::TempDir dir;
  const RunConfig config = fixture_config();
  Model model(config.model);
  model.init_parameters(1);
  // A training step of 2 sequences of 16 tokens: far smaller than the evaluation's 512-token prompts.
  std::vector<int32_t> ids, targets;
  for (int32_t i = 0; i < 32; ++i) {
    ids.push_back((7 * i + 3) % 900);
    targets.push_back(i % 16 == 15 ? -1 : (7 * (i + 1) + 3) % 900);
  }
  const Tensor id_tensor = testing::index_tensor(ids), target_tensor = testing::index_tensor(targets);
  const double loss = model.forward_backward(id_tensor, target_tensor, SeqLayout::uniform(2, 16));
  const size_t saved = model.saved_activation_bytes(), scratch = model.scratch_bytes();
  const Tensor grads = model.params().grads().clone(), values = model.params().values().clone();

  TrainingEvaluation evaluation = fixture_evaluation(config, dir);
  nlohmann::json line = {{"step", 50}};
  std::ostringstream log;
  evaluation.run(model, 50, line, log);
  EXPECT_NE(log.str().find("step 50: [eval] arc_easy,niah_single_1 on cpu in f32\n"), std::string::npos) << log.str();
  EXPECT_EQ(model.saved_activation_bytes(), saved);
  EXPECT_EQ(model.scratch_bytes(), scratch);
  EXPECT_TRUE(same_bytes(model.params().grads(), grads));
  EXPECT_TRUE(same_bytes(model.params().values(), values));

  // An exception inside gives the step arenas back too: the next step is the same step.
  EXPECT_THROW(model.with_separate_arenas([] { throw std::runtime_error("inside"); }), std::runtime_error);
  model.params().zero_grads();
  EXPECT_EQ(model.forward_backward(id_tensor, target_tensor, SeqLayout::uniform(2, 16)), loss);
  EXPECT_EQ(model.saved_activation_bytes(), saved);
}

TEST(TrainingEvaluation, DuringACpuRunLeavesItsLossesBitForBit) {
  testing::TempDir dir;
  const std::string corpus = testing::make_text_corpus(dir / "text").string();
  const auto run = [&](const std::string& name, int64_t eval_every, std::ostream& log) {
    const std::string text = testing::eval_run_config({.name = name,
                                                       .model = testing::tiny_hybrid_model(testing::kTextCorpusVocab),
                                                       .data = corpus,
                                                       .steps = 12,
                                                       .eval_every = eval_every});
    const TrainSummary summary = train(parse_run_config(text, name + ".toml", {"run.dir=" + dir.path().string()}), log);
    EXPECT_TRUE(summary.complete) << name;
    return testing::json_lines(dir / name / "metrics.jsonl");
  };
  std::ostringstream with_log, without_log;
  const auto with = run("with", 6, with_log), without = run("without", 0, without_log);
  ASSERT_EQ(with.size(), without.size());
  for (size_t i = 0; i < with.size(); ++i) {
    EXPECT_EQ(with[i]["loss"].get<double>(), without[i]["loss"].get<double>()) << "step " << with[i]["step"];
    EXPECT_EQ(with[i]["grad_norm"].get<double>(), without[i]["grad_norm"].get<double>()) << "step " << with[i]["step"];
    const bool eval_step = with[i]["step"] == 6 || with[i]["step"] == 12;
    EXPECT_EQ(with[i].contains("eval/arc_easy/acc"), eval_step) << "step " << with[i]["step"];
    EXPECT_EQ(with[i].contains("eval/niah_single_1@512/score"), eval_step) << "step " << with[i]["step"];
  }
  EXPECT_NE(with_log.str().find(std::string("step 6: [eval] ") + testing::kEvalRunTasks + " on cpu in f32"),
            std::string::npos)
      << with_log.str();
  const auto results = testing::json_lines(dir / "with" / "eval.jsonl");
  ASSERT_EQ(results.size(), 6u);  // 3 tasks at steps 6 and 12
  for (const nlohmann::json& r : results) {
    EXPECT_EQ(r["device"], "cpu");
    EXPECT_EQ(r["dtype"], "f32");
  }
  EXPECT_EQ(results[5]["task"], "niah_single_1");
  EXPECT_EQ(results[5]["step"], 12);
}

}  // namespace
}  // namespace linea
