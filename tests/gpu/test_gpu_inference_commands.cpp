// `linea score`, `generate` and `eval` with --device cuda against --device cpu on the same trained
// runs, and [eval] during a CUDA run (passed on an H100, 2026-12-06).
//
// Three runs train on the GPU on testing/eval_run.h's text corpus (40 steps; d_model 64, GDN and
// attention 1:1, vocabulary 900): "f32" in f32 (train.precision = "f32"), which the commands read
// back onto cuda in f32; "bf16" (precision auto) with [eval] every 20 steps, read back in bf16; and
// "bf16_plain", the same without [eval]. The reference is --device cpu on the same checkpoints (f32,
// from the f32 master weights the checkpoints hold).
// - score (10 contexts and continuations): |Δ log-likelihood| per scored token ≤ 1e-4 in f32
//   (with the same greedy flags) and ≤ 0.1 in bf16 (the logits come from bf16 weights and
//   activations through two layers and a bf16 head);
// - generate (greedy, 4 prompts of different lengths, 24 tokens, one batch): the same ids in f32;
//   in bf16 every token cuda chose is within 0.1 nats of the CPU's most likely token at its
//   position (the CPU's log-probabilities along cuda's continuation), so that a near tie may go
//   either way but no worse token is taken;
// - eval (arc_easy, arc_challenge, lambada_openai, niah_single_1 at 512 tokens): every metric
//   within 1e-4 relative in f32; in bf16 lambada's log-perplexity (the mean log-likelihood of the
//   last words, a few tokens each) within 0.3 nats; every line names the device and dtype;
// - [eval] during the bf16 run: its log names cuda and bf16; its losses and grad norms equal those
//   of the run without [eval] within 1e-6 (printed: whether bit for bit); its results at step 40
//   equal those of `linea eval --device cuda` on the step-40 checkpoint within 1e-6 relative.
// The worst differences are printed ("[cuda inference] ...").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/trained_model.h"
#include "tests/gpu/gpu_test.h"
#include "tests/testing/eval_run.h"
#include "tests/testing/json_lines.h"
#include "tests/testing/kernel_test.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"
#include "worker/run_config.h"
#include "worker/trainer.h"

namespace linea {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kSteps = 40;

const std::string kModel = R"([model]
d_model = 64
layers = 2
vocab = 900
mixer = "gdn"
hybrid = "1:1"
mlp_hidden = 128
[model.linear]
heads = 2
d_k = 32
d_v = 32
[model.attention]
heads = 2
head_dim = 32
)";

// Per scored token (score) and per chosen token (generate, bf16), in nats.
double tolerance(DType dtype) { return dtype == DType::bf16 ? 0.1 : 1e-4; }

std::vector<json> parse_lines(const std::string& text) {
  std::vector<json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

// The trained runs, shared by the tests (trained on first use, removed at exit).
struct TrainedRuns {
  testing::TempDir dir;
  fs::path corpus;
  std::string bf16_log;
  fs::path run(const std::string& name) const { return dir / "runs" / name; }
};

const TrainedRuns& trained_runs() {
  static const std::unique_ptr<TrainedRuns> runs = [] {
    auto r = std::make_unique<TrainedRuns>();
    r->corpus = testing::make_text_corpus(r->dir / "text");
    const auto train_run = [&r](const std::string& name, const std::string& precision, int64_t eval_every) {
      const std::string text = testing::eval_run_config({.name = name,
                                                         .model = kModel,
                                                         .data = r->corpus.string(),
                                                         .device = "cuda",
                                                         .precision = precision,
                                                         .steps = kSteps,
                                                         .eval_every = eval_every});
      std::ostringstream log;
      const TrainSummary summary =
          train(parse_run_config(text, name + ".toml", {"run.dir=" + (r->dir / "runs").string()}), log);
      EXPECT_TRUE(summary.complete) << name << ": " << log.str();
      return log.str();
    };
    train_run("f32", "f32", 0);
    r->bf16_log = train_run("bf16", "auto", kSteps / 2);
    train_run("bf16_plain", "auto", 0);
    return r;
  }();
  return *runs;
}

// The run whose checkpoint the commands read back in `dtype` on cuda.
std::string run_for(DType dtype) { return trained_runs().run(dtype == DType::bf16 ? "bf16" : "f32").string(); }

using GpuInferenceCommands = testing::GpuTest;
class GpuInferenceCommandsByDtype : public GpuInferenceCommands, public ::testing::WithParamInterface<DType> {};

TEST_P(GpuInferenceCommandsByDtype, ScoreMatchesTheCpu) {
  const DType dtype = GetParam();
  std::string input;
  const std::vector<std::pair<std::string, std::string>> texts = {
      {"the quiet cat sees the", " red river near the garden."},
      {"the old farmer", " carries the bird"},
      {"", "the small boat meets the teacher near the mill."},
      {"the bright child finds the cold lantern near the bridge. the", " tired"},
      {"near the", " market"},
      {"the clever bird hears the old", " cat near the hill. the red boat paints the child"},
      {"the", " the the the"},
      {"the cold river keeps the", " quiet farmer near the forest."},
      {"the small teacher follows the bright boat near the school. the old cat", " sees the river"},
      {"the red", " lantern"}};
  for (const auto& [context, continuation] : texts) {
    input += json{{"context", context}, {"continuation", continuation}}.dump() + "\n";
  }
  std::ofstream(trained_runs().dir / "score.jsonl") << input;
  const std::vector<std::string> args = {run_for(dtype), "--input", (trained_runs().dir / "score.jsonl").string(),
                                         "--device"};
  auto with = [&](const std::string& device) {
    std::vector<std::string> a = args;
    a.push_back(device);
    return a;
  };
  const auto [cpu_out, cpu_err] = testing::command_output("score", with("cpu"));
  const auto [cuda_out, cuda_err] = testing::command_output("score", with("cuda"));
  EXPECT_NE(cuda_err.find("linea score: device cuda, dtype " + std::string(dtype_name(dtype))), std::string::npos)
      << cuda_err;
  const auto cpu = parse_lines(cpu_out), cuda = parse_lines(cuda_out);
  ASSERT_EQ(cpu.size(), texts.size());
  ASSERT_EQ(cuda.size(), texts.size());
  double worst = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const int64_t tokens = cpu[i]["tokens"].get<int64_t>();
    ASSERT_EQ(cuda[i]["tokens"].get<int64_t>(), tokens);
    const double per_token =
        std::abs(cuda[i]["log_likelihood"].get<double>() - cpu[i]["log_likelihood"].get<double>()) /
        double(std::max<int64_t>(tokens, 1));
    worst = std::max(worst, per_token);
    EXPECT_LE(per_token, tolerance(dtype)) << "line " << i + 1;
    if (dtype == DType::f32) {
      EXPECT_EQ(cuda[i]["greedy"], cpu[i]["greedy"]) << "line " << i + 1;
    }
  }
  std::printf("[cuda inference] score %s: worst |Δ log-likelihood| per token %.3g\n",
              std::string(dtype_name(dtype)).c_str(), worst);
}

TEST_P(GpuInferenceCommandsByDtype, GenerateMatchesTheCpu) {
  const DType dtype = GetParam();
  const std::vector<std::string> prompts = {"the old farmer", "the bright bird follows the", "near the",
                                            "the cold boat carries the tired child near the mill. the"};
  std::string input;
  for (const std::string& p : prompts) input += json{{"prompt", p}}.dump() + "\n";
  std::ofstream(trained_runs().dir / "prompts.jsonl") << input;
  std::vector<std::string> args = {
      run_for(dtype), "--input", (trained_runs().dir / "prompts.jsonl").string(), "--max-tokens", "24", "--batch", "4",
      "--device"};
  args.push_back("cpu");
  const auto cpu = parse_lines(testing::command_output("generate", args).first);
  args.back() = "cuda";
  const auto cuda = parse_lines(testing::command_output("generate", args).first);
  ASSERT_EQ(cpu.size(), prompts.size());
  ASSERT_EQ(cuda.size(), prompts.size());

  // The CPU's log-probabilities along each of cuda's continuations: how far below the CPU's most
  // likely token each token cuda chose lies.
  const cli::TrainedModel reference = cli::load_trained_model(run_for(dtype), "cpu");
  const auto tokenizer = cli::load_run_tokenizer(reference.config, "", reference.model->config().vocab);
  double worst_gap = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto generated = cuda[p]["ids"].get<std::vector<int32_t>>();
    if (dtype == DType::f32) {
      EXPECT_EQ(generated, cpu[p]["ids"].get<std::vector<int32_t>>()) << prompts[p];
    }
    ASSERT_FALSE(generated.empty());
    std::vector<int32_t> ids = tokenizer->encode(prompts[p]);
    ids.insert(ids.begin(), tokenizer->eos_id());  // a text prompt starts a document
    const int64_t prompt_length = static_cast<int64_t>(ids.size());
    ids.insert(ids.end(), generated.begin(), generated.end() - 1);  // the last token predicts nothing scored
    std::vector<int64_t> rows;
    for (size_t t = 0; t < generated.size(); ++t) rows.push_back(prompt_length - 1 + static_cast<int64_t>(t));
    const Tensor logits = reference.model->logits(testing::index_tensor(ids),
                                                  SeqLayout::uniform(1, static_cast<int64_t>(ids.size())), rows);
    const int64_t vocab = logits.dim(1);
    for (size_t t = 0; t < generated.size(); ++t) {
      const float* row = logits.data<float>() + static_cast<int64_t>(t) * vocab;
      const float best = *std::max_element(row, row + vocab);
      const double gap = double(best) - double(row[generated[t]]);  // log-softmax differences are logit differences
      worst_gap = std::max(worst_gap, gap);
      EXPECT_LE(gap, tolerance(dtype)) << prompts[p] << ": token " << t;
    }
  }
  std::printf("[cuda inference] generate %s: worst gap below the CPU's most likely token %.3g nats\n",
              std::string(dtype_name(dtype)).c_str(), worst_gap);
}

// The key of an eval.jsonl result line: "<task>[@<context length>]".
std::string result_key(const json& line) {
  std::string key = line["task"].get<std::string>();
  if (line.contains("context_length")) key += "@" + line["context_length"].dump();
  return key;
}

// `linea eval RUN` of testing::kEvalRunTasks (and arc_challenge) on `device`, its lines by result_key.
std::map<std::string, json> eval_results(const std::string& run, const std::string& device, const fs::path& out,
                                         const std::string& tasks) {
  testing::command_output("eval",
                          {run, "--tasks", tasks, "--limit", "2", "--lengths", "512", "--data-dir",
                           (testing::fixture_dir() / "eval").string(), "--device", device, "--out", out.string()});
  std::map<std::string, json> results;
  for (const json& line : testing::json_lines(out)) results[result_key(line)] = line;
  return results;
}

// The largest relative difference between the metrics of two result lines (every number but the
// counts), with an expectation per metric that it is at most `limit`.
double expect_metrics_close(const json& a, const json& b, double limit, const std::string& what) {
  double worst = 0;
  for (const auto& [key, value] : a.items()) {
    if (!value.is_number_float()) continue;
    const double x = value.get<double>(), y = b.at(key).get<double>();
    const double relative = std::abs(x - y) / std::max(1.0, std::abs(x));
    worst = std::max(worst, relative);
    EXPECT_LE(relative, limit) << what << " " << key << ": " << x << " vs " << y;
  }
  return worst;
}

TEST_P(GpuInferenceCommandsByDtype, EvalMatchesTheCpu) {
  const DType dtype = GetParam();
  const std::string tasks = std::string(testing::kEvalRunTasks) + ",arc_challenge";
  const std::string suffix = std::string(dtype_name(dtype)) + ".jsonl";
  const auto cpu = eval_results(run_for(dtype), "cpu", trained_runs().dir / ("eval-cpu-" + suffix), tasks);
  const auto cuda = eval_results(run_for(dtype), "cuda", trained_runs().dir / ("eval-cuda-" + suffix), tasks);
  ASSERT_EQ(cpu.size(), 4u);
  ASSERT_EQ(cuda.size(), 4u);
  double worst = 0;
  for (const auto& [task, line] : cuda) {
    EXPECT_EQ(line["device"], std::string("cuda")) << task;
    EXPECT_EQ(line["dtype"], std::string(dtype_name(dtype))) << task;
    EXPECT_EQ(cpu.at(task)["dtype"], std::string("f32")) << task;
    if (dtype == DType::f32) worst = std::max(worst, expect_metrics_close(cpu.at(task), line, 1e-4, task));
  }
  const double cpu_perplexity = cpu.at("lambada_openai")["perplexity"].get<double>();
  const double cuda_perplexity = cuda.at("lambada_openai")["perplexity"].get<double>();
  // The last words' mean log-likelihoods (the fixture's words are far from the corpus: perplexities
  // of about 1e9 on the CPU run of this check).
  EXPECT_NEAR(std::log(cuda_perplexity), std::log(cpu_perplexity), dtype == DType::bf16 ? 0.3 : 1e-4);
  std::printf(
      "[cuda inference] eval %s: lambada perplexity cpu %.4f cuda %.4f; worst relative metric difference %.3g "
      "(f32 only)\n",
      std::string(dtype_name(dtype)).c_str(), cpu_perplexity, cuda_perplexity, worst);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuInferenceCommandsByDtype, ::testing::Values(DType::f32, DType::bf16),
                         testing::dtype_test_name);

TEST_F(GpuInferenceCommands, EvalDuringTrainingRunsOnTheGpuAndLeavesTheRun) {
  EXPECT_NE(trained_runs().bf16_log.find("step 20: [eval] " + std::string(testing::kEvalRunTasks) + " on cuda in bf16"),
            std::string::npos)
      << trained_runs().bf16_log;
  const auto with = testing::json_lines(trained_runs().run("bf16") / "metrics.jsonl");
  const auto without = testing::json_lines(trained_runs().run("bf16_plain") / "metrics.jsonl");
  ASSERT_EQ(with.size(), size_t(kSteps));
  ASSERT_EQ(without.size(), size_t(kSteps));
  bool exact = true;
  for (size_t i = 0; i < with.size(); ++i) {
    for (const char* key : {"loss", "grad_norm"}) {
      EXPECT_NEAR(with[i][key].get<double>(), without[i][key].get<double>(), 1e-6) << key << " at step " << i + 1;
      exact = exact && with[i][key] == without[i][key];
    }
  }
  EXPECT_TRUE(with[19].contains("eval/arc_easy/acc"));
  EXPECT_TRUE(with[39].contains("eval/niah_single_1@512/score"));

  // The results of step 40 against `linea eval --device cuda` on the step-40 checkpoint.
  std::map<std::string, json> during;
  for (const json& line : testing::json_lines(trained_runs().run("bf16") / "eval.jsonl")) {
    EXPECT_EQ(line["device"], std::string("cuda"));
    EXPECT_EQ(line["dtype"], std::string("bf16"));
    if (line["step"] == kSteps) during[result_key(line)] = line;
  }
  const auto after = eval_results(trained_runs().run("bf16").string(), "cuda", trained_runs().dir / "eval-after.jsonl",
                                  testing::kEvalRunTasks);
  ASSERT_EQ(during.size(), 3u);
  ASSERT_EQ(after.size(), 3u);
  double worst = 0;
  for (const auto& [task, line] : during) {
    worst = std::max(worst, expect_metrics_close(line, after.at(task), 1e-6, task));
  }
  std::printf(
      "[cuda inference] [eval] during training: losses %s the run without [eval]; step %lld's results vs "
      "linea eval on its checkpoint: worst relative difference %.3g\n",
      exact ? "bit-identical to" : "within 1e-6 of", static_cast<long long>(kSteps), worst);
}

}  // namespace
}  // namespace linea
