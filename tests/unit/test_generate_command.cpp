// `linea score`, `linea generate`, `linea export`, `linea logits` and `linea params --inference`,
// run in-process: a checkpoint written in the format `linea train` commits (model/<parameter>
// tensors, the resolved config in the manifest) is read back from its run directory and from the
// checkpoint directory itself; score prints the log-likelihoods ModelLanguageModel computes,
// generate its greedy continuations (and sampled ones, reproducibly), export an fla checkpoint that
// imports back to the same model, logits the logits of every position of the run's model and of
// its export read as hf:DIR; bad input names the file, line and key. --device: cpu gives these
// results, auto takes the CPU where no CUDA device is visible (and says so on stderr), cuda there
// and a word other than auto, cpu or cuda are errors naming the flag (the CUDA results:
// tests/gpu/test_gpu_inference_commands.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "inference/hf_checkpoint.h"
#include "inference/model_language_model.h"
#include "kernels/device_memory.h"
#include "model/decoding_memory.h"
#include "model/model.h"
#include "tests/testing/kernel_test.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tiny_model.h"
#include "worker/placement.h"
#include "worker/run_config.h"

namespace linea {
namespace {

const std::string kConfig = "device = \"cpu\"\n[run]\nname = \"tiny\"\n" + testing::tiny_hybrid_model(32) + R"([data]
vocab_size = 32
eos_id = 0
)";

// RUN/checkpoints/step-000000007/ holding a model initialised with seed 3; returns RUN.
struct SavedRun {
  testing::TempDir dir;
  std::filesystem::path run;
  RunConfig config;
  SavedRun() : run(dir / "run"), config(parse_run_config(kConfig, "tiny.toml", {})) {
    Model model(config.model);
    model.init_parameters(3);
    CheckpointState state;
    state.step = 7;
    state.config = config.resolved;
    for (const Parameter& p : model.params().params()) state.tensors.emplace_back("model/" + p.name, p.value.clone());
    save_checkpoint(run / "checkpoints", state, 1);
  }
  std::unique_ptr<Model> model() const {
    auto m = std::make_unique<Model>(config.model);
    m->init_parameters(3);
    return m;
  }
};

std::vector<nlohmann::json> output_lines(const std::string& out) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

std::string write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
  return path.string();
}

TEST(ScoreCommand, PrintsTheLogLikelihoodsOfTheCheckpointedModel) {
  const SavedRun saved;
  const std::string input = write_file(saved.dir / "score.jsonl",
                                       "{\"context_ids\": [1, 2, 3], \"continuation_ids\": [4, 5]}\n\n"
                                       "{\"context_ids\": [], \"continuation_ids\": [7, 8, 9]}\n");
  auto model = saved.model();
  inference::ModelLanguageModel lm(*model);
  const auto expected = lm.score({{{1, 2, 3}, {4, 5}}, {{}, {7, 8, 9}}});
  for (const std::filesystem::path& path : {saved.run, saved.run / "checkpoints" / "step-000000007"}) {
    ::testing::internal::CaptureStdout();
    EXPECT_EQ(testing::run_command("score", {path.string(), "--input", input, "--device", "cpu"}), 0);
    const auto lines = output_lines(::testing::internal::GetCapturedStdout());
    ASSERT_EQ(lines.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_NEAR(lines[i]["log_likelihood"].get<double>(), expected[i].log_likelihood, 1e-9);
      EXPECT_EQ(lines[i]["greedy"].get<bool>(), expected[i].greedy);
    }
    EXPECT_EQ(lines[1]["tokens"].get<int>(), 3);
  }
}

TEST(GenerateCommand, PrintsGreedyAndSampledContinuationsAndThroughput) {
  const SavedRun saved;
  const std::string input = write_file(saved.dir / "prompts.jsonl",
                                       "{\"prompt_ids\": [1, 2, 3]}\n{\"prompt_ids\": [5], \"max_tokens\": 2}\n");
  auto model = saved.model();
  inference::ModelLanguageModel lm(*model);
  const auto greedy = lm.generate({{{1, 2, 3}, 5, {}}, {{5}, 2, {}}});
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(
      testing::run_command("generate", {saved.run.string(), "--input", input, "--max-tokens", "5", "--device", "cpu"}),
      0);
  const auto lines = output_lines(::testing::internal::GetCapturedStdout());
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["ids"].get<inference::TokenIds>(), greedy[0]);
  EXPECT_EQ(lines[1]["ids"].get<inference::TokenIds>(), greedy[1]);
  EXPECT_NE(err.find("prefill: 4 tokens"), std::string::npos) << err;
  EXPECT_NE(err.find("tokens/s"), std::string::npos) << err;

  const std::vector<std::string> sampled = {
      saved.run.string(), "--input", input,      "--max-tokens", "5", "--temperature", "1.0", "--top-p", "0.95",
      "--seed",           "4",       "--device", "cpu"};
  std::string first, second;
  for (std::string* out : {&first, &second}) {
    ::testing::internal::CaptureStdout();
    EXPECT_EQ(testing::run_command("generate", sampled), 0);
    *out = ::testing::internal::GetCapturedStdout();
  }
  EXPECT_EQ(first, second);
}

TEST(GenerateCommand, BadInputNamesTheLine) {
  const SavedRun saved;
  const std::string input = write_file(saved.dir / "bad.jsonl", "{\"prompt_ids\": [1]}\n{\"prompt_ids\": \"x\"}\n");
  EXPECT_TRUE(testing::throws_invalid_argument(
      [&] {
        testing::run_command("generate", {saved.run.string(), "--input", input});
      },
      {"bad.jsonl:2", "prompt_ids"}));
  const std::string score_input = write_file(saved.dir / "bad_score.jsonl", "{\"context_ids\": [1]}\n");
  EXPECT_TRUE(testing::throws_invalid_argument(
      [&] {
        testing::run_command("score", {saved.run.string(), "--input", score_input});
      },
      {"bad_score.jsonl:1", "continuation"}));
  EXPECT_TRUE(testing::throws_invalid_argument(
      [&] { testing::run_command("score", {(saved.dir / "nowhere").string()}); }, {"nowhere", "not a run"}));
  std::filesystem::create_directories(saved.dir / "empty_run");
  EXPECT_TRUE(testing::throws_invalid_argument(
      [&] { testing::run_command("generate", {(saved.dir / "empty_run").string()}); }, {"no committed checkpoint"}));
}

TEST(InferenceCommands, DeviceFlagChoosesTheDeviceAndNamesIt) {
  const SavedRun saved;
  const std::string scores =
      write_file(saved.dir / "score.jsonl", "{\"context_ids\": [1, 2], \"continuation_ids\": [3]}\n");
  const std::string prompts = write_file(saved.dir / "prompts.jsonl", "{\"prompt_ids\": [1, 2, 3]}\n");
  for (const auto& [command, input] : {std::pair{"score", scores}, std::pair{"generate", prompts}}) {
    const std::vector<std::string> args = {saved.run.string(), "--input", input};
    const auto with = [&](std::vector<std::string> more) {
      more.insert(more.begin(), args.begin(), args.end());
      return more;
    };
    const auto [cpu_out, cpu_err] = testing::command_output(command, with({"--device", "cpu"}));
    EXPECT_NE(cpu_err.find(std::string("linea ") + command + ": device cpu, dtype f32\n"), std::string::npos)
        << cpu_err;
    EXPECT_TRUE(testing::throws_invalid_argument(
        [&] {
          testing::run_command(command, with({"--device", "gpu"}));
        },
        {"--device: expected auto, cpu or cuda, got \"gpu\""}))
        << command;
    if (cuda_device_available()) continue;  // auto and cuda run on the GPU there (tests/gpu/)
    // No CUDA device here: auto (the default) takes the CPU and says why; cuda is an error.
    const auto [auto_out, auto_err] = testing::command_output(command, args);
    EXPECT_EQ(auto_out, cpu_out) << command;
    EXPECT_NE(auto_err.find(std::string("linea ") + command +
                            ": device cpu, dtype f32 (--device auto: " + cuda_unavailable_reason() + ")"),
              std::string::npos)
        << auto_err;
    EXPECT_TRUE(testing::throws_invalid_argument(
        [&] {
          testing::run_command(command, with({"--device", "cuda"}));
        },
        {"--device cuda, but " + cuda_unavailable_reason(), "use --device cpu or auto"}))
        << command;
  }
}

TEST(ExportCommand, WritesAnHfCheckpointThatImportsBack) {
  const SavedRun saved;
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(testing::run_command("export", {saved.run.string(), "--format", "hf", (saved.dir / "hf").string()}), 0);
  EXPECT_NE(::testing::internal::GetCapturedStdout().find("exported step 7"), std::string::npos);
  Model imported(saved.config.model);
  imported.init_parameters(99);
  inference::import_hf(imported, saved.dir / "hf");
  auto original = saved.model();
  const Tensor ids = testing::index_tensor({1, 2, 3, 4, 5});
  const Tensor a = original->logits(ids, SeqLayout::uniform(1, 5), {0, 4});
  const Tensor b = imported.logits(ids, SeqLayout::uniform(1, 5), {0, 4});
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]);
  EXPECT_TRUE(testing::throws_invalid_argument(
      [&] {
        testing::run_command("export", {saved.run.string(), "--format", "gguf", (saved.dir / "x").string()});
      },
      {"--format", "expected hf"}));
}

TEST(LogitsCommand, WritesEveryPositionsLogitsOfARunAndOfAnHfCheckpoint) {
  const SavedRun saved;
  const std::string input =
      write_file(saved.dir / "tokens.json", R"({"input_ids": [[1, 2, 3, 4, 5], [31, 0, 7, 7, 2]]})");
  const std::string config = write_file(saved.dir / "run.toml", kConfig);
  auto model = saved.model();
  const Tensor ids = testing::index_tensor({1, 2, 3, 4, 5, 31, 0, 7, 7, 2});
  std::vector<int64_t> rows(10);
  for (int64_t i = 0; i < 10; ++i) rows[i] = i;
  const Tensor expected = model->logits(ids, SeqLayout::uniform(2, 5), rows);
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(testing::run_command("export", {saved.run.string(), "--format", "hf", (saved.dir / "hf").string()}), 0);
  const std::string hf = "hf:" + (saved.dir / "hf").string();
  const std::vector<std::vector<std::string>> calls = {
      {saved.run.string(), "--input", input, "--out", (saved.dir / "run.safetensors").string()},
      {hf, "--config", config, "--input", input, "--out", (saved.dir / "hf.safetensors").string()}};
  for (const auto& call : calls) {
    EXPECT_EQ(testing::run_command("logits", call), 0);
    const SafetensorsFile file(call.back());
    EXPECT_EQ(file.shape("logits"), (Shape{2, 5, 32}));
    EXPECT_EQ(file.dtype("input_ids"), "I64");
    const Tensor logits = file.read_f32("logits");
    for (int64_t i = 0; i < expected.numel(); ++i) ASSERT_EQ(logits.data<float>()[i], expected.data<float>()[i]);
  }
  EXPECT_NE(::testing::internal::GetCapturedStdout().find("wrote the logits of 2 sequences of 5 tokens (vocab 32)"),
            std::string::npos);

  const std::string out = (saved.dir / "x.safetensors").string();
  EXPECT_TRUE(testing::throws_invalid_argument(
      [&] {
        testing::run_command("logits", {hf, "--input", input, "--out", out});
      },
      {"hf:", "needs --config"}));
  const std::string ragged = write_file(saved.dir / "ragged.json", R"({"input_ids": [[1, 2], [3]]})");
  EXPECT_TRUE(testing::throws_invalid_argument(
      [&] {
        testing::run_command("logits", {saved.run.string(), "--input", ragged, "--out", out});
      },
      {"ragged.json: input_ids[1]", "T equal in every sequence"}));
  const std::string outside = write_file(saved.dir / "outside.json", R"({"input_ids": [[1, 32]]})");
  EXPECT_TRUE(testing::throws_invalid_argument(
      [&] {
        testing::run_command("logits", {saved.run.string(), "--input", outside, "--out", out});
      },
      {"outside.json: input_ids[0]", "[0, 32)", "got 32"}));
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(ParamsCommand, InferencePrintsTheDecodingStatePerSequence) {
  const SavedRun saved;
  const std::string text = kConfig;
  const std::string config = write_file(saved.dir / "model.toml",
                                        text.substr(text.find("[model]"), text.find("[data]") - text.find("[model]")));
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(testing::run_command("params", {config, "--inference", "model.attention.window=64"}), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("decoding state per sequence"), std::string::npos) << out;
  EXPECT_NE(out.find("gdn"), std::string::npos) << out;
  EXPECT_NE(out.find("63"), std::string::npos) << out;  // the window keeps 63 tokens
}

}  // namespace
}  // namespace linea
