// Trains a run config's text in this process (linea::train, its log discarded) with run.dir set to
// `dir`, expects the run to complete, and returns DIR/RUN_NAME/metrics.jsonl's lines; and the mean
// loss over some of them. For the CPU training tests, with the config text of a short run on the
// default corpus and the check that its loss falls there.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/testing/json_lines.h"
#include "worker/run_config.h"
#include "worker/trainer.h"

namespace linea::testing {

inline std::vector<nlohmann::json> train_metrics(const std::string& text, const std::filesystem::path& dir,
                                                 const std::string& run_name) {
  const RunConfig config = parse_run_config(text, run_name + ".toml", {"run.dir=" + dir.string()});
  std::ostringstream log;
  const TrainSummary summary = train(config, log);
  EXPECT_TRUE(summary.complete);
  return json_lines(dir / run_name / "metrics.jsonl");
}

// The mean loss of metrics lines [begin, end).
inline double mean_loss(const std::vector<nlohmann::json>& lines, size_t begin, size_t end) {
  double sum = 0;
  for (size_t i = begin; i < end; ++i) sum += lines[i]["loss"].get<double>();
  return sum / double(end - begin);
}

// A CPU run "t" of `model` (its [model] tables) on the default corpus (the embedded dictionary,
// vocabulary 4096) with the optimizer `kind` at `lr` (as the config spells it), no evaluation and no
// checkpoints.
struct DefaultCorpusRun {
  std::string model, kind, lr;
  int warmup_steps, steps, batch_seqs;
};

inline std::string default_corpus_config(const DefaultCorpusRun& r) {
  return "device = \"cpu\"\n[run]\nname = \"t\"\n" + r.model + "[optimizer]\nkind = \"" + r.kind + "\"\nlr = " + r.lr +
         "\nwarmup_steps = " + std::to_string(r.warmup_steps) + "\n[train]\nsteps = " + std::to_string(r.steps) +
         "\nbatch_seqs = " + std::to_string(r.batch_seqs) +
         "\nseq_len = 64\neval_every = 0\ncheckpoint_every = -1\n[data]\npath = \"default\"\n";
}

// Expects a run on the default corpus to start near ln(4096) and the mean loss of its last five
// steps to lie at least `drop` below that of its first five; prints both after `label`. Returns
// {first, last}.
inline std::pair<double, double> expect_loss_falls(const std::vector<nlohmann::json>& lines, double drop,
                                                   const std::string& label) {
  const size_t n = lines.size();
  const double first = mean_loss(lines, 0, 5), last = mean_loss(lines, n - 5, n);
  EXPECT_NEAR(lines.front()["loss"].get<double>(), std::log(4096.0), 0.3) << label;
  EXPECT_LT(last, first - drop) << label << ": " << first << " → " << last;
  std::cout << label << ": mean loss of steps 1–5 " << first << ", of steps " << n - 4 << "–" << n << " " << last
            << "\n";
  return {first, last};
}

}  // namespace linea::testing
