// scripts/multi-gpu.sh on the CPU (LINEA_MULTI_GPU_DEVICE=cpu, LINEA_GPUS=2, synthetic shards, the
// tiny configs): every part runs the real linea binary under mpirun and reports what it should —
// the 1×2 and 2×1 layouts and the 1×2 → 2×1 resume follow the one-rank loss within f32 rounding,
// the scaling and large-model runs report tokens/s and an efficiency per layout and leave no
// checkpoint, report.md holds the tables — and the script refuses to write into a folder that
// already holds results.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_directory.h"
#include "tests/testing/synthetic_shards.h"
#include "tests/testing/temp_dir.h"

namespace linea {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs the script with 2 ranks on the cpu into `out`; returns its exit status.
int run_script(const testing::TempDir& tmp, const fs::path& out, const fs::path& log) {
  const std::string command =
      "LINEA_BIN=" LINEA_BINARY " LINEA_GPUS=2 LINEA_MULTI_GPU_DEVICE=cpu LINEA_MULTI_GPU_DATA=" +
      (tmp.path() / "data").string() +
      " LINEA_MULTI_GPU_OVERRIDES='data.vocab_size=64 data.eos_id=0' LINEA_MULTI_GPU_OUT=" + out.string() +
      " bash " LINEA_SOURCE_DIR "/scripts/multi-gpu.sh >" + log.string() + " 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

TEST(MultiGpuScript, EveryPartOnTwoCpuRanks) {
  testing::TempDir tmp;
  testing::make_synthetic_data(tmp.path() / "data");
  const fs::path out = tmp.path() / "out";
  ASSERT_EQ(run_script(tmp, out, tmp.path() / "script.log"), 0) << read_text(tmp.path() / "script.log");

  std::map<std::string, std::vector<json>> by_part;
  std::ifstream results(out / "results.jsonl");
  for (std::string line; std::getline(results, line);) {
    const json j = json::parse(line);
    by_part[j["part"].get<std::string>()].push_back(j);
  }
  // Correctness: the one-rank run (against itself: exactly), then 1×2 and 2×1 against it, all 20
  // steps, within f32 rounding.
  ASSERT_EQ(by_part["correctness"].size(), 3u);
  EXPECT_EQ(by_part["correctness"][0]["layout"], "1x1");
  EXPECT_EQ(by_part["correctness"][0]["max_abs_dloss"], 0.0);
  EXPECT_EQ(by_part["correctness"][1]["layout"], "1x2");
  EXPECT_EQ(by_part["correctness"][2]["layout"], "2x1");
  for (const json& j : by_part["correctness"]) {
    EXPECT_EQ(j["steps"], 20) << j;
    EXPECT_EQ(j["pass"], true) << j;
    EXPECT_LE(j["max_rel_dloss"].get<double>(), 2e-4) << j;
  }
  ASSERT_EQ(by_part["resume"].size(), 1u);
  EXPECT_EQ(by_part["resume"][0]["layout"], "1x2→2x1");
  EXPECT_EQ(by_part["resume"][0]["steps"], 20);
  EXPECT_EQ(by_part["resume"][0]["pass"], true) << by_part["resume"][0];
  // Scaling: the tiny model on 1 rank, then 2 as DP (1×2) and as TP (2×1).
  ASSERT_EQ(by_part["scaling"].size(), 3u);
  for (const json& j : by_part["scaling"]) {
    EXPECT_EQ(j["ok"], true) << j;
    EXPECT_GT(j["tokens_per_s"].get<double>(), 0) << j;
    EXPECT_NEAR(j["tokens_per_s_per_gpu"].get<double>(), j["tokens_per_s"].get<double>() / j["gpus"].get<double>(),
                0.1);
  }
  // The timed runs write no checkpoint (train.checkpoint_every = -1 in configs/multi-gpu/scaling.toml).
  EXPECT_TRUE(list_committed_checkpoints(out / "runs" / "scaling_tiny_tp1_dp1" / "checkpoints").empty());
  ASSERT_EQ(by_part["scaling_efficiency"].size(), 2u);
  EXPECT_EQ(by_part["scaling_efficiency"][0]["mode"], "dp");
  EXPECT_EQ(by_part["scaling_efficiency"][1]["mode"], "tp2");
  for (const json& j : by_part["scaling_efficiency"]) {
    EXPECT_NEAR(j["efficiency"].get<double>(),
                j["tokens_per_s_per_gpu"].get<double>() / j["one_gpu_tokens_per_s"].get<double>(), 1e-3);
  }
  ASSERT_EQ(by_part["large"].size(), 1u);
  EXPECT_EQ(by_part["large"][0]["tp"], 2);
  EXPECT_EQ(by_part["large"][0]["ok"], true) << by_part["large"][0];

  const std::string report = read_text(out / "report.md");
  EXPECT_NE(report.find("| correctness | 2x1 | 20 |"), std::string::npos) << report;
  EXPECT_NE(report.find("| resume | 1x2→2x1 | 20 |"), std::string::npos) << report;
  EXPECT_NE(report.find("| tiny | tp2 | 2 | 2×1 |"), std::string::npos) << report;
  EXPECT_NE(report.find("## Large model under TP"), std::string::npos) << report;

  // Results are never overwritten: a second call into the same folder is refused, untouched.
  const std::string before = read_text(out / "results.jsonl");
  EXPECT_EQ(run_script(tmp, out, tmp.path() / "again.log"), 2);
  EXPECT_NE(read_text(tmp.path() / "again.log").find("is not empty"), std::string::npos);
  EXPECT_EQ(read_text(out / "results.jsonl"), before);
}

}  // namespace
}  // namespace linea
