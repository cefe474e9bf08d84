// [eval] in the run config and the evaluation a training run does with it: the keys parsed and
// checked (an unknown task is an error naming eval.tasks), and TrainingEvaluation appending each
// result to RUN_DIR/eval.jsonl and its metrics to the step's metrics line.
#include <gtest/gtest.h>

#include <fstream>

#include "data/tokenizer.h"
#include "model/model.h"
#include "tests/testing/error_of.h"
#include "tests/testing/fixtures.h"
#include "tests/testing/temp_dir.h"
#include "worker/run_config.h"
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

TEST(TrainingEvaluation, ParsesEvalAndRunsItsTasks) {
  testing::TempDir dir;
  const std::string data = (testing::fixture_dir() / "eval").string();
  const RunConfig config = parse_run_config(kConfig, "run.toml", {"eval.data_dir=\"" + data + "\""});
  EXPECT_EQ(config.eval.tasks, (std::vector<std::string>{"arc_easy", "niah_single_1"}));
  EXPECT_EQ(config.eval.every, 50);
  EXPECT_EQ(config.eval.context_lengths, std::vector<int64_t>{512});
  EXPECT_NE(
      testing::error_of([] { parse_run_config(kConfig, "run.toml", {"eval.tasks=[\"nosuch\"]"}); }).find("eval.tasks"),
      std::string::npos);

  Model model(config.model);
  model.init_parameters(1);
  auto tokenizer = data::load_tokenizer(
      {"hf-tokenizer-json", (testing::fixture_dir() / "tokenizer" / "hf_bytelevel.json").string()});
  TrainingEvaluation evaluation(config.eval, std::move(tokenizer), dir.path());
  nlohmann::json line = {{"step", 50}};
  std::ostringstream log;
  evaluation.run(model, 50, line, log);
  EXPECT_TRUE(line.contains("eval/niah_single_1@512/score"));
  EXPECT_TRUE(line.contains("eval/arc_easy/acc"));
  EXPECT_TRUE(line.contains("eval/arc_easy/acc_norm_stderr"));
  std::ifstream in(dir / "eval.jsonl");
  std::string first;
  ASSERT_TRUE(std::getline(in, first));
  EXPECT_EQ(nlohmann::json::parse(first)["task"], "arc_easy");
  EXPECT_EQ(nlohmann::json::parse(first)["step"], 50);
}

}  // namespace
}  // namespace linea
