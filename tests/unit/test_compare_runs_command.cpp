// `linea compare-runs` and `linea throughput`, run in-process through the command registry on
// metrics.jsonl files written by the test: one JSON line per run with the figures of
// coordinator/loss_comparison.h and coordinator/steady_throughput.h, exit status 0 when every run
// is within the tolerance and 1 when one is not, and a log of other steps is an error.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace linea {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using testing::run_command;

// A run directory whose metrics.jsonl logs these losses at steps 1, 2, ..., 1000 tokens a step,
// each step taking 0.5 s.
std::string write_run(const testing::TempDir& tmp, const std::string& name, const std::vector<double>& losses) {
  const fs::path dir = tmp.path() / name;
  fs::create_directories(dir);
  std::ofstream out(dir / "metrics.jsonl");
  for (size_t i = 0; i < losses.size(); ++i) {
    const int step = static_cast<int>(i + 1);
    out << json{{"step", step}, {"loss", losses[i]}, {"tokens", 1000 * step}, {"tokens_per_s", 2000.0}}.dump() << "\n";
  }
  return dir.string();
}

std::vector<json> json_lines(const std::string& text) {
  std::vector<json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

TEST(CompareRunsCommand, OneLinePerRunAndTheVerdictInTheExitStatus) {
  testing::TempDir tmp;
  const std::string one = write_run(tmp, "one", {8.0, 6.0, 4.0});
  const std::string close = write_run(tmp, "close", {8.0, 6.0, 4.0004});  // relative 1e-4
  const std::string far = write_run(tmp, "far", {8.0, 6.06, 4.0});        // relative 1e-2
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run_command("compare-runs", {one, close, far, "--tolerance", "1e-3"}), 1);
  const std::vector<json> lines = json_lines(::testing::internal::GetCapturedStdout());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["run"], close);
  EXPECT_EQ(lines[0]["steps"], 3);
  EXPECT_EQ(lines[0]["pass"], true);
  EXPECT_NEAR(lines[0]["max_rel_dloss"].get<double>(), 1e-4, 1e-9);
  EXPECT_EQ(lines[1]["run"], far);
  EXPECT_EQ(lines[1]["pass"], false);
  EXPECT_EQ(lines[1]["worst_step"], 2);
  EXPECT_NEAR(lines[1]["max_abs_dloss"].get<double>(), 0.06, 1e-9);
  EXPECT_EQ(lines[1]["tolerance"], 1e-3);

  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run_command("compare-runs", {one, close, "--tolerance", "1e-3"}), 0);
  EXPECT_EQ(json_lines(::testing::internal::GetCapturedStdout()).size(), 1u);

  const std::string shorter = write_run(tmp, "shorter", {8.0, 6.0});
  EXPECT_THROW(run_command("compare-runs", {one, shorter}), std::runtime_error);
  EXPECT_THROW(run_command("compare-runs", {one, close, "--tolerance", "-1"}), std::invalid_argument);
  EXPECT_EQ(run_command("compare-runs", {one}), 2);  // usage
}

TEST(ThroughputCommand, TokensPerSecondAfterTheWarmUp) {
  testing::TempDir tmp;
  const std::string run = write_run(tmp, "run", {8.0, 7.0, 6.0, 5.0});
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run_command("throughput", {run, "--warmup", "1"}), 0);
  const std::vector<json> lines = json_lines(::testing::internal::GetCapturedStdout());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["run"], run);
  EXPECT_EQ(lines[0]["steps"], 3);
  EXPECT_DOUBLE_EQ(lines[0]["tokens"].get<double>(), 3000);
  EXPECT_DOUBLE_EQ(lines[0]["seconds"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(lines[0]["tokens_per_s"].get<double>(), 2000);
  EXPECT_THROW(run_command("throughput", {run, "--warmup", "4"}), std::runtime_error);
}

}  // namespace
}  // namespace linea
