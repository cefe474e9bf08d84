// Sweep files → runs (names from the values, the product of the axes, overrides, run directories,
// process counts from parallel.tp × parallel.dp), errors that name the offending key, the example
// sweeps in configs/sweeps/, and the results a finished sweep gets (summary tables, SVG plots).
#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "coordinator/results.h"
#include "coordinator/svg_plot.h"
#include "coordinator/sweep.h"
#include "tests/testing/coordinator_harness.h"

namespace linea::testing {
namespace {

using coordinator::expand_sweep;
using coordinator::SweepPlan;

class SweepTest : public ::testing::Test {
 protected:
  SweepTest() {
    write_text(dir_ / "configs/gdn.toml", "[model]\nmixer = \"gdn\"\n");
    write_text(dir_ / "configs/kda.toml", "[model]\nmixer = \"kda\"\n");
    write_text(dir_ / "configs/tp2.toml", "[model]\nmixer = \"gdn\"\n[parallel]\ntp = 2\ndp = 2\n");
  }

  SweepPlan expand(const std::string& text) { return expand_sweep(text, "study.toml", dir_.path(), dir_.path()); }

  // Expands `text` expecting an error that mentions every string of `mentions`.
  void expect_error(const std::string& text, const std::vector<std::string>& mentions) {
    try {
      expand(text);
      ADD_FAILURE() << "accepted:\n" << text;
    } catch (const std::invalid_argument& e) {
      for (const std::string& m : mentions)
        EXPECT_NE(std::string(e.what()).find(m), std::string::npos) << "\"" << e.what() << "\" lacks \"" << m << "\"";
    }
  }

  TempDir dir_;
};

TEST_F(SweepTest, ExpandsTheProductOfTheAxesInFileOrder) {
  const SweepPlan plan = expand(R"(
[sweep]
name = "grid"
base = "configs/gdn.toml"
dir = "out"
baseline = "mixer-gdn_lr-0.001"
[sweep.set]
"train.steps" = 100
[sweep.grid]
"model.mixer" = ["gdn", "kda", "gdn2"]
"optimizer.lr" = [3e-4, 1e-3]
)");
  EXPECT_EQ(plan.sweep.name, "grid");
  EXPECT_EQ(plan.sweep.dir, dir_ / "out/grid");
  EXPECT_EQ(plan.sweep.baseline, "grid/mixer-gdn_lr-0.001");
  ASSERT_EQ(plan.runs.size(), 6u);
  std::vector<std::string> names;
  for (const auto& r : plan.runs) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"grid/mixer-gdn_lr-3e-4", "grid/mixer-gdn_lr-0.001",
                                             "grid/mixer-kda_lr-3e-4", "grid/mixer-kda_lr-0.001",
                                             "grid/mixer-gdn2_lr-3e-4", "grid/mixer-gdn2_lr-0.001"}));
  const auto& r = plan.runs[3];
  EXPECT_EQ(r.config, dir_ / "configs/gdn.toml");
  EXPECT_EQ(r.overrides,
            (std::vector<std::string>{"train.steps=100", "model.mixer=\"kda\"", "optimizer.lr=0.001",
                                      "run.dir=\"" + (dir_ / "out/grid") + "\"", "run.name=\"mixer-kda_lr-0.001\""}));
  EXPECT_EQ(r.run_dir, dir_ / "out/grid/mixer-kda_lr-0.001");
  EXPECT_EQ(r.sweep, "grid");
  EXPECT_EQ(r.processes, 1);
}

TEST_F(SweepTest, BaseAxisBundledAxisAndProcessCounts) {
  const SweepPlan plan = expand(R"(
[sweep]
[sweep.grid]
base = ["configs/gdn.toml", "configs/tp2.toml"]
ctx = [{label = "2k", "train.seq_len" = 2048, "train.batch_seqs" = 16},
       {"train.seq_len" = 4096, "train.batch_seqs" = 8}]
parallel.dp = [1, 3]
)");
  EXPECT_EQ(plan.sweep.name, "study");  // the file's stem
  ASSERT_EQ(plan.runs.size(), 8u);
  EXPECT_EQ(plan.runs[0].name, "study/gdn_ctx-2k_dp-1");
  EXPECT_EQ(plan.runs[2].name, "study/gdn_ctx-4096-8_dp-1");
  EXPECT_EQ(plan.runs[2].overrides[0], "train.seq_len=4096");
  EXPECT_EQ(plan.runs[2].overrides[1], "train.batch_seqs=8");
  EXPECT_EQ(plan.runs[1].processes, 3);  // gdn: tp 1 × dp 3
  EXPECT_EQ(plan.runs[4].name, "study/tp2_ctx-2k_dp-1");
  EXPECT_EQ(plan.runs[4].processes, 2);  // tp 2 from the file × dp 1 from the axis
  EXPECT_EQ(plan.runs[5].processes, 6);
  EXPECT_EQ(plan.runs[4].config, dir_ / "configs/tp2.toml");
}

// Runs whose configs differ in file and overrides together (seed 001's mixers × ratios beside a
// transformer that takes no ratio): one axis of tables naming their base.
TEST_F(SweepTest, BundlesMayNameTheirBaseConfig) {
  const SweepPlan plan = expand(R"(
[sweep]
baseline = "tp2_lr-0.001"
[sweep.grid]
run = [{base = "configs/tp2.toml"},
       {label = "gdn-3to1", base = "configs/gdn.toml", "model.hybrid" = "3:1"},
       {base = "configs/gdn.toml", "model.hybrid" = "6:1"}]
"optimizer.lr" = [1e-3]
)");
  ASSERT_EQ(plan.runs.size(), 3u);
  EXPECT_EQ(plan.runs[0].name, "study/tp2_lr-0.001");
  EXPECT_EQ(plan.runs[0].config, dir_ / "configs/tp2.toml");
  EXPECT_EQ(plan.runs[0].processes, 4);  // tp 2 × dp 2 from the file
  EXPECT_EQ(plan.runs[0].overrides[0], "optimizer.lr=0.001");
  EXPECT_EQ(plan.runs[1].name, "study/gdn-3to1_lr-0.001");
  EXPECT_EQ(plan.runs[1].config, dir_ / "configs/gdn.toml");
  EXPECT_EQ(plan.runs[1].overrides[0], "model.hybrid=\"3:1\"");
  EXPECT_EQ(plan.runs[2].name, "study/gdn-6-1_lr-0.001");  // the file's stem and the values
  EXPECT_EQ(plan.sweep.baseline, "study/tp2_lr-0.001");

  const std::string grid = "[sweep]\n[sweep.grid]\n";
  expect_error(grid + "run = [{base = \"configs/gdn.toml\"}, {\"model.hybrid\" = \"3:1\"}]\n",
               {"sweep.grid.run", "every table of the axis to name its `base` config, or none"});
  expect_error(grid + "run = [{base = 3}]\n", {"sweep.grid.run.base", "expected a config file path"});
  expect_error("[sweep]\nbase = \"configs/gdn.toml\"\n[sweep.grid]\nrun = [{base = \"configs/gdn.toml\"}]\n",
               {"sweep.grid.base", "conflicts with sweep.base"});
  expect_error(grid + "base = [\"configs/gdn.toml\"]\nrun = [{base = \"configs/gdn.toml\"}]\n",
               {"sweep.grid", "at most one axis that gives the runs' base config"});
  expect_error(grid + "run = [{base = \"configs/missing.toml\"}]\n", {"configs/missing.toml"});
}

TEST_F(SweepTest, ValuesBecomeTomlLiteralsAndSafeNames) {
  const SweepPlan plan = expand(R"(
[sweep]
base = "configs/gdn.toml"
[sweep.grid]
"model.hybrid" = ["3:1", [3, 7]]
"model.tie_embeddings" = [true]
"optimizer.lr" = [2.0]
)");
  ASSERT_EQ(plan.runs.size(), 2u);
  EXPECT_EQ(plan.runs[0].name, "study/hybrid-3-1_tie_embeddings-true_lr-2");
  EXPECT_EQ(plan.runs[1].name, "study/hybrid-3.7_tie_embeddings-true_lr-2");
  EXPECT_EQ(plan.runs[0].overrides[0], "model.hybrid=\"3:1\"");
  EXPECT_EQ(plan.runs[1].overrides[0], "model.hybrid=[3, 7]");
  EXPECT_EQ(plan.runs[0].overrides[1], "model.tie_embeddings=true");
  EXPECT_EQ(plan.runs[0].overrides[2], "optimizer.lr=2.0");  // stays a float
}

TEST_F(SweepTest, AxesSharingALastComponentUseTheirWholeKey) {
  const SweepPlan plan = expand(R"(
[sweep]
base = "configs/gdn.toml"
[sweep.grid]
"model.linear.heads" = [2]
"model.attention.heads" = [4]
)");
  EXPECT_EQ(plan.runs[0].name, "study/model.linear.heads-2_model.attention.heads-4");
}

TEST_F(SweepTest, BadSweepFilesAreErrorsNamingTheKey) {
  const std::string head = "[sweep]\nbase = \"configs/gdn.toml\"\n";
  expect_error(head + "bse = 1\n", {"study.toml: unknown key 'sweep.bse'"});
  expect_error(head + "[other]\nx = 1\n", {"'other'", "unknown key"});
  expect_error(head + "[sweep.grid]\n\"model.mixer\" = \"gdn\"\n", {"sweep.grid.model.mixer", "array"});
  expect_error(head + "[sweep.grid]\n\"model.mixer\" = []\n", {"sweep.grid.model.mixer", "non-empty"});
  expect_error(head + "[sweep.grid]\n\"model.mixer\" = [{\"a.b\" = 1}, 2]\n", {"sweep.grid.model.mixer", "all tables"});
  expect_error(head + "[sweep.grid]\n\"model.date\" = [1979-05-27]\n", {"sweep.grid.model.date"});
  expect_error("[sweep]\n[sweep.grid]\n\"model.mixer\" = [\"gdn\"]\n", {"sweep.base"});
  expect_error("[sweep]\nbase = \"configs/missing.toml\"\n", {"sweep.base", "configs/missing.toml"});
  expect_error(head + "[sweep.grid]\nbase = [\"configs/kda.toml\"]\n", {"sweep.grid.base", "conflicts"});
  expect_error(head + "[sweep.grid]\n\"model.mixer\" = [\"a b\", \"a-b\"]\n", {"sweep.grid", "a-b", "two runs get"});
  expect_error(head + "[sweep.set]\n\"optimizer.lr\" = 1.0\n[sweep.grid]\n\"optimizer.lr\" = [2.0]\n",
               {"sweep.grid.optimizer.lr", "sweep.set"});
  expect_error(head + "baseline = \"nope\"\n[sweep.grid]\n\"optimizer.lr\" = [1.0]\n", {"sweep.baseline", "lr-1"});
  expect_error(head + "name = \"bad/name\"\n", {"sweep.name"});
  expect_error(head +
                   "[sweep.grid]\n\"a.x\" = [1,2,3,4,5,6,7,8,9,10]\n\"b.x\" = [1,2,3,4,5,6,7,8,9,10]\n"
                   "\"c.x\" = [1,2,3,4,5,6,7,8,9,10]\n\"d.x\" = [1,2,3,4,5,6,7,8,9,10]\n\"e.x\" = [1,2]\n",
               {"sweep.grid", "at most 10000 runs"});
  expect_error("[sweep]\nbase = \"configs/tp2.toml\"\n[sweep.grid]\n\"parallel.tp\" = [\"two\"]\n",
               {"parallel.tp", "integer"});
  expect_error("[sweep\nbase = 1\n", {"study.toml:1:"});
}

TEST_F(SweepTest, ExampleSweepsExpand) {
  const std::string source = std::getenv("LINEA_SOURCE_DIR") ? std::getenv("LINEA_SOURCE_DIR") : ".";
  for (const char* model : {"gdn-340m", "kda-340m", "kda-h-340m", "deltanet-340m", "gdn2-340m", "transformer-340m",
                            "tiny", "deltanet-340m"})
    write_text(dir_ / (std::string("configs/models/") + model + ".toml"), "[model]\n");
  for (const char* mixer : {"gla", "retnet", "hgrn", "hgrn2", "mamba2", "rwkv6", "transformer"}) {
    for (const char* size : {"340m", "1.3b"}) {
      write_text(dir_ / (std::string("configs/models/") + mixer + "-" + size + ".toml"), "[model]\n");
    }
  }
  const std::vector<std::pair<std::string, size_t>> expected = {
      {"optimizer-lr-340m", 18}, {"hybrid-ratio-340m", 5}, {"mixers-340m", 6},        {"context-length-340m", 10},
      {"tiny-smoke", 2},         {"seed001-340m", 31},     {"seed001-1.3b", 31},      {"seed001-reduced", 31},
      {"routing-340m", 16},      {"routing-reduced", 16},  {"mqar-mixers-width", 33}, {"recall-study-reduced", 21}};
  for (const auto& [name, runs] : expected) {
    const std::string path = source + "/configs/sweeps/" + name + ".toml";
    const SweepPlan plan = expand_sweep(read_text(path), path, dir_ / "configs/sweeps", dir_.path());
    EXPECT_EQ(plan.sweep.name, name);
    EXPECT_EQ(plan.runs.size(), runs) << name;
    if (name.rfind("routing-", 0) != 0) continue;
    // Every routed run of every mixer against that mixer's unrouted run, with the seed's effect.
    ASSERT_EQ(plan.sweep.comparisons.size(), 12u) << name;
    for (const coordinator::SweepComparison& c : plan.sweep.comparisons) {
      const std::string mixer = c.run.substr(0, c.run.find("_routing-"));
      EXPECT_EQ(c.baseline, mixer + "_routing-none") << c.run;
      EXPECT_FALSE(c.reported.empty()) << c.run;
      const auto run = std::find_if(plan.runs.begin(), plan.runs.end(), [&](const auto& r) { return r.name == c.run; });
      ASSERT_NE(run, plan.runs.end()) << c.run;
      std::string kind = c.run.substr(c.run.find("_routing-") + 9);  // the label: "cler-h" for cler_h
      std::replace(kind.begin(), kind.end(), '-', '_');
      EXPECT_NE(std::find(run->overrides.begin(), run->overrides.end(), "model.routing.kind=\"" + kind + "\""),
                run->overrides.end())
          << c.run;
    }
  }
}

// A relative base is the sweep file's neighbour wherever linea is run from; dir is where it runs.
TEST_F(SweepTest, BaseIsRelativeToTheSweepFileAndDirToTheCurrentDirectory) {
  namespace fs = std::filesystem;
  write_text(dir_ / "studies/models/m.toml", "[model]\nmixer = \"gdn\"\n");
  write_text(dir_ / "studies/lr.toml",
             "[sweep]\nbase = \"models/m.toml\"\ndir = \"out\"\n[sweep.grid]\n\"optimizer.lr\" = [1e-3, 2e-3]\n");
  const std::string work = dir_ / "elsewhere";
  fs::create_directories(work);
  const fs::path before = fs::current_path();
  fs::current_path(work);
  SweepPlan plan;
  EXPECT_NO_THROW(plan = coordinator::expand_sweep_file(dir_ / "studies/lr.toml"));
  fs::current_path(before);
  ASSERT_EQ(plan.runs.size(), 2u);
  EXPECT_EQ(plan.runs[0].config, dir_ / "studies/models/m.toml");
  EXPECT_EQ(plan.sweep.dir, work + "/out/lr");
}

TEST_F(SweepTest, ComparisonsNameRunsOfTheSweep) {
  write_text(dir_ / "base.toml", "[model]\n");
  const std::string head =
      "[sweep]\nname = \"c\"\nbase = \"base.toml\"\n[sweep.grid]\n\"model.mixer\" = [\"gdn\", \"kda\"]\n";
  const SweepPlan plan =
      expand_sweep(head + "[[sweep.compare]]\nrun = \"mixer-kda\"\nbaseline = \"mixer-gdn\"\nreported = \"-0.01\"\n",
                   "c.toml", dir_.path(), dir_.path());
  ASSERT_EQ(plan.sweep.comparisons.size(), 1u);
  EXPECT_EQ(plan.sweep.comparisons[0].run, "c/mixer-kda");
  EXPECT_EQ(plan.sweep.comparisons[0].baseline, "c/mixer-gdn");
  EXPECT_EQ(plan.sweep.comparisons[0].reported, "-0.01");
  const auto bad = [&](const std::string& compare, const std::string& key) {
    try {
      expand_sweep(head + compare, "c.toml", dir_.path(), dir_.path());
    } catch (const std::invalid_argument& e) {
      return std::string(e.what()).find(key) != std::string::npos;
    }
    return false;
  };
  EXPECT_TRUE(bad("[[sweep.compare]]\nrun = \"mixer-mamba\"\nbaseline = \"mixer-gdn\"\n", "sweep.compare[0].run"));
  EXPECT_TRUE(bad("[[sweep.compare]]\nrun = \"mixer-kda\"\n", "sweep.compare[0].baseline"));
  EXPECT_TRUE(
      bad("[[sweep.compare]]\nrun = \"mixer-kda\"\nbaseline = \"mixer-gdn\"\nnote = \"x\"\n", "sweep.compare[0].note"));
  EXPECT_TRUE(bad("[sweep.compare]\nrun = \"mixer-kda\"\n", "sweep.compare"));
}

// Runs s/NAME (config /c.toml) in SWEEP_DIR/NAME for each of `names`.
std::vector<coordinator::RunSpec> sweep_runs(const std::string& sweep_dir, std::initializer_list<const char*> names) {
  std::vector<coordinator::RunSpec> runs;
  for (const char* name : names) {
    coordinator::RunSpec r;
    r.name = std::string("s/") + name;
    r.config = "/c.toml";
    r.run_dir = sweep_dir + "/" + name;
    runs.push_back(r);
  }
  return runs;
}

// A finished sweep on disk: sweep.json, and per run metrics.jsonl and coordinator.json.
TEST(SweepResults, SummaryTablesAndPlots) {
  TempDir dir;
  const std::string sweep_dir = dir / "s";
  coordinator::SweepSpec sweep{"s", sweep_dir, "s/b", {}};
  const std::vector<coordinator::RunSpec> runs = sweep_runs(sweep_dir, {"a", "b"});
  coordinator::write_sweep_manifest(sweep, runs);
  EXPECT_THROW(coordinator::write_sweep_manifest(sweep, runs), std::runtime_error);  // never overwritten
  // Run a: 4 steps at 100..400 tokens/s (median of the second half: 350); b: 4 steps at 200 tokens/s.
  write_text(sweep_dir + "/a/metrics.jsonl",
             "{\"step\": 0, \"loss\": 9, \"tokens_per_s\": 100, \"step_time_s\": 1.0}\n"
             "{\"step\": 1, \"loss\": 7, \"tokens_per_s\": 200, \"step_time_s\": 0.5, \"val_loss\": 7.5}\n"
             "{\"step\": 2, \"loss\": 5, \"tokens_per_s\": 300, \"step_time_s\": 0.4}\n"
             "{\"step\": 3, \"loss\": 4, \"tokens_per_s\": 400, \"step_time_s\": 0.2, \"val_loss\": 4.5}\n"
             "{\"finished\": true}\n");
  write_text(sweep_dir + "/b/metrics.jsonl",
             "{\"step\": 0, \"loss\": 8, \"tokens_per_s\": 200}\n{\"step\": 1, \"loss\": 6, \"tokens_per_s\": 200}\n"
             "{\"step\": 2, \"loss\": 5.5, \"tokens_per_s\": 200, \"tokens\": 200}\n"
             "{\"step\": 1, \"loss\": 6.5, \"tokens_per_s\": 200}\n"
             "{\"step\": 3, \"loss\"");  // a resume re-logged step 1; the last line is still being written
  write_text(sweep_dir + "/a/coordinator.json",
             R"({"state": "completed", "goodput": 0.9, "wall_s": 12, "accounting": {"restarts": 1}})");
  const auto results = coordinator::collect_sweep_results(sweep_dir);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].state, "completed");
  EXPECT_EQ(results[0].steps, 3);
  EXPECT_DOUBLE_EQ(*results[0].final_loss, 4);
  EXPECT_DOUBLE_EQ(*results[0].final_val_loss, 4.5);
  EXPECT_DOUBLE_EQ(*results[0].tokens_per_s, 350);
  EXPECT_DOUBLE_EQ(*results[0].iteration_time_s, 0.3);
  EXPECT_DOUBLE_EQ(*results[0].normalized_throughput, 350.0 / 200.0);  // baseline b
  EXPECT_EQ(results[0].restarts, 1);
  EXPECT_EQ(results[1].state, "unknown");
  EXPECT_EQ(results[1].steps, 2);
  EXPECT_FALSE(results[1].final_val_loss);
  EXPECT_DOUBLE_EQ(*results[1].iteration_time_s, 0.5);  // 100 tokens a step at 200 tokens/s

  const auto written = coordinator::write_sweep_results(sweep_dir);
  EXPECT_EQ(written.size(), 4u);
  const std::string csv = read_text(sweep_dir + "/summary.csv");
  EXPECT_NE(csv.find("s/a,completed,3,4,4.5,350,1.75,0.3,1,0.9,12\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("s/b,unknown,2,5.5,,200,1,0.5,0,,\n"), std::string::npos) << csv;
  const std::string md = read_text(sweep_dir + "/summary.md");
  EXPECT_NE(md.find("| a | completed | 3 | 4.0000 | 4.5000 | 350 | 1.750 | 0.3000 | 1 | 90.0% | 12 |"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("## Evaluation"), std::string::npos);  // no run has evaluation results
  // Evaluation results: the newest line per task of a's eval.jsonl, b's last val_acc (MQAR).
  write_text(
      sweep_dir + "/a/eval.jsonl",
      "{\"task\": \"piqa\", \"samples\": 2, \"acc\": 0.5, \"acc_norm\": 0.25, \"step\": 2}\n"
      "{\"task\": \"niah_single_1\", \"context_length\": 1024, \"samples\": 2, \"score\": 75, \"answer_nll\": 2.5, "
      "\"step\": 3}\n"
      "{\"task\": \"piqa\", \"samples\": 2, \"acc\": 1, \"acc_norm\": 0.75, \"step\": 3}\n");
  write_text(sweep_dir + "/b/metrics.jsonl",
             "{\"step\": 1, \"loss\": 2, \"val_acc\": 0.3}\n{\"step\": 2, \"loss\": 1, \"val_acc\": 0.9}\n");
  coordinator::write_sweep_results(sweep_dir);
  const std::string with_eval = read_text(sweep_dir + "/summary.md");
  EXPECT_NE(
      with_eval.find("| run | niah_single_1@1024 answer_nll | niah_single_1@1024 score | piqa acc | piqa acc_norm | "
                     "val_acc |"),
      std::string::npos)
      << with_eval;
  EXPECT_NE(with_eval.find("| s/a | 2.5 | 75 | 1 | 0.75 | — |"), std::string::npos) << with_eval;
  EXPECT_NE(with_eval.find("| s/b | — | — | — | — | 0.9 |"), std::string::npos) << with_eval;
  const std::string svg = read_text(sweep_dir + "/loss.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  size_t polylines = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++polylines;
  EXPECT_EQ(polylines, 2u);
  EXPECT_NE(read_text(sweep_dir + "/val_loss.svg").find(">a</text>"), std::string::npos);
}

// sweep.json's comparisons: summary.md gets each run's final val loss against its matched
// baseline's, the difference and the reported effect.
TEST(SweepResults, ComparisonsAgainstMatchedBaselines) {
  TempDir dir;
  const std::string sweep_dir = dir / "s";
  coordinator::SweepSpec sweep{"s", sweep_dir, "s/a", {{"s/b", "s/a", "≈ −0.01 (seed)"}, {"s/c", "s/a", ""}}};
  const std::vector<coordinator::RunSpec> runs = sweep_runs(sweep_dir, {"a", "b", "c"});
  coordinator::write_sweep_manifest(sweep, runs);
  write_text(sweep_dir + "/a/metrics.jsonl", "{\"step\": 1, \"loss\": 5, \"val_loss\": 4.5}\n");
  write_text(sweep_dir + "/b/metrics.jsonl", "{\"step\": 1, \"loss\": 5, \"val_loss\": 4.375}\n");
  write_text(sweep_dir + "/c/metrics.jsonl", "{\"step\": 1, \"loss\": 5}\n");
  coordinator::write_sweep_results(sweep_dir);
  const std::string md = read_text(sweep_dir + "/summary.md");
  EXPECT_NE(md.find("## Against matched baselines"), std::string::npos) << md;
  EXPECT_NE(md.find("| b | a | 4.3750 | 4.5000 | -0.1250 | ≈ −0.01 (seed) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| c | a | — | 4.5000 | — | — |"), std::string::npos) << md;
}

TEST(SvgPlot, TicksAreRoundAndCoverTheRange) {
  EXPECT_EQ(coordinator::nice_ticks(0, 10, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(coordinator::nice_ticks(2.1, 2.9, 4), (std::vector<double>{2.2, 2.4, 2.6, 2.8}));
  const std::string svg = coordinator::render_line_plot({"t <&>", "x", "y"}, {{"r&d", {0, 1, 2}, {1, NAN, 3}}});
  EXPECT_NE(svg.find("t &lt;&amp;&gt;"), std::string::npos);
  EXPECT_NE(svg.find(">r&amp;d</text>"), std::string::npos);
  size_t polylines = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++polylines;
  EXPECT_EQ(polylines, 2u);  // the NaN breaks the line
}

}  // namespace
}  // namespace linea::testing
