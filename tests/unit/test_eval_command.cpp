// `linea eval`, run in-process on a checkpoint written as `linea train` commits one: the
// multiple-choice results it appends to RUN_DIR/eval.jsonl equal the ones computed directly from
// ModelLanguageModel::score on the same model (--device cpu; each line names the device and
// dtype), a RULER-style task runs at the given length with its score and teacher-forced answer
// metrics equal to score_recall's, and a bad task list, a missing data file or a bad --device is
// an error naming it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "data/tokenizer.h"
#include "eval/lm_eval_layouts.h"
#include "eval/loglikelihood_scoring.h"
#include "eval/recall_scoring.h"
#include "eval/ruler_tasks.h"
#include "eval/vocabulary_words.h"
#include "inference/model_language_model.h"
#include "model/model.h"
#include "tests/testing/error_of.h"
#include "tests/testing/fixtures.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tiny_model.h"
#include "worker/run_config.h"

namespace linea {
namespace {

const std::string kConfig = "device = \"cpu\"\n[run]\nname = \"tiny\"\n" + testing::tiny_hybrid_model(900) + R"([data]
vocab_size = 900
eos_id = 0
)";

TEST(EvalCommand, AppendsResultsThatEqualADirectScoreComputation) {
  testing::TempDir dir;
  const RunConfig config = parse_run_config(kConfig, "tiny.toml", {});
  Model model(config.model);
  model.init_parameters(5);
  CheckpointState state;
  state.step = 11;
  state.config = config.resolved;
  for (const Parameter& p : model.params().params()) state.tensors.emplace_back("model/" + p.name, p.value.clone());
  save_checkpoint(dir / "run" / "checkpoints", state, 1);

  const std::filesystem::path data = testing::fixture_dir() / "eval";
  const std::string tokenizer_file = (testing::fixture_dir() / "tokenizer" / "hf_bytelevel.json").string();
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(testing::run_command("eval", {(dir / "run").string(), "--tasks", "arc,lambada", "--data-dir", data.string(),
                                          "--tokenizer", "hf:" + tokenizer_file, "--device", "cpu"}),
            0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("arc_easy (2): acc "), std::string::npos) << out;

  std::vector<nlohmann::json> lines;
  std::ifstream in(dir / "run" / "eval.jsonl");
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["task"], "arc_challenge");
  EXPECT_EQ(lines[2]["task"], "lambada_openai");
  EXPECT_EQ(lines[0]["step"], 11);
  for (const nlohmann::json& line : lines) {
    EXPECT_EQ(line["device"], "cpu");
    EXPECT_EQ(line["dtype"], "f32");
  }

  const auto tok = data::load_tokenizer({"hf-tokenizer-json", tokenizer_file});
  inference::ModelLanguageModel lm(model);
  for (int i = 0; i < 2; ++i) {
    const std::string task = i == 0 ? "arc_challenge" : "arc_easy";
    const auto direct = eval::score_multiple_choice(task, eval::read_multiple_choice_task(task, data), lm, *tok);
    EXPECT_DOUBLE_EQ(lines[size_t(i)]["acc"].get<double>(), direct.metrics.at("acc").value) << task;
    EXPECT_DOUBLE_EQ(lines[size_t(i)]["acc_norm"].get<double>(), direct.metrics.at("acc_norm").value) << task;
  }
  const auto lambada = eval::score_last_word("lambada_openai", eval::read_lambada(data), lm, *tok);
  EXPECT_NEAR(lines[2]["perplexity"].get<double>(), lambada.metrics.at("perplexity").value, 1e-9);
  EXPECT_GT(lines[2]["perplexity"].get<double>(), 1.0);

  // A RULER task at a short length: its line has RULER's score and the teacher-forced answer
  // metrics, equal to score_recall's on the same samples and model.
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(testing::run_command("eval", {(dir / "run").string(), "--tasks", "niah_single_1", "--lengths", "512",
                                          "--limit", "2", "--out", (dir / "ruler.jsonl").string(), "--tokenizer",
                                          "hf:" + tokenizer_file, "--device", "cpu"}),
            0);
  const std::string ruler_out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(ruler_out.find("niah_single_1 @512 (2): score "), std::string::npos) << ruler_out;
  std::ifstream ruler_in(dir / "ruler.jsonl");
  std::string ruler_text;
  ASSERT_TRUE(std::getline(ruler_in, ruler_text));
  const nlohmann::json ruler = nlohmann::json::parse(ruler_text);
  const auto words = eval::vocabulary_words(*tok);
  const auto ruler_direct = eval::score_recall(
      "niah_single_1", 512, eval::generate_ruler_samples("niah_single_1", {512, 2, 42, data}, *tok, words), lm, *tok);
  for (const char* metric : {"score", "answer_nll", "answer_greedy"}) {
    EXPECT_NEAR(ruler[metric].get<double>(), ruler_direct.metrics.at(metric).value, 1e-9) << metric;
    EXPECT_TRUE(ruler.contains(std::string(metric) + "_stderr")) << metric;
  }
  EXPECT_GT(ruler["answer_nll"].get<double>(), 0.0);

  EXPECT_NE(testing::error_of([&] {
              testing::run_command("eval", {(dir / "run").string(), "--tasks", "nosuch"});
            }).find("\"nosuch\" is no task"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              testing::run_command("eval", {(dir / "run").string(), "--tasks", "piqa", "--data-dir",
                                            dir.path().string(), "--tokenizer", "hf:" + tokenizer_file});
            }).find("piqa.jsonl: cannot open"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              testing::run_command("eval", {(dir / "run").string(), "--tasks", "arc", "--device", "tpu"});
            }).find("--device: expected auto, cpu or cuda, got \"tpu\""),
            std::string::npos);
}

}  // namespace
}  // namespace linea
