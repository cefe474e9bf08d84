// Sweep files: a study as the product of listed values, expanded into runs for the coordinator.
//
//   [sweep]
//   name = "mixers-340m"                   # optional; default: the file's stem
//   base = "../models/gdn-340m.toml"  # the config given to `linea train` (or a grid axis "base")
//   dir = "runs/sweeps"                    # optional (default "runs"): runs go to DIR/NAME/<run>/
//   baseline = "mixer-gdn"                 # optional: the run (label) throughput is normalized to
//   [sweep.set]                            # overrides for every run
//   "train.steps" = 20000
//   [sweep.grid]                           # one axis per key; runs = the product of all axes
//   "model.mixer" = ["gdn", "kda"]
//   "optimizer.lr" = [3e-4, 1e-3]
//   context = [{label = "2k", "train.seq_len" = 2048, "train.batch_seqs" = 16},
//              {label = "4k", "train.seq_len" = 4096, "train.batch_seqs" = 8}]
//   [[sweep.compare]]                      # optional, repeated: a run against its matched baseline
//   run = "gdn-clvr"                       #   (labels); `linea results` shows the difference in
//   baseline = "gdn-none"                  #   final val loss, and `reported` (any text) beside it
//   reported = "≈ −0.01 (seed 000)"
//
// An axis whose values are tables sets several keys together (a zipped axis, e.g. context length
// with the batch that keeps tokens per step fixed); its optional `label` names the value in run
// names (else the values joined by '-'). A table may name the run's config file as `base` (every
// table of that axis then does, and no other axis nor sweep.base gives one): an axis of such tables
// lists runs whose configs differ, e.g. {label = "gla-3to1", base = "../models/gla-340m.toml",
// "model.hybrid" = "3:1"}; without a label it is named by the file's stem and its other values.
// Each run is named "<sweep>/<label>", the label
// joining "<axis>-<value>" with '_' (the axis is the key's last component, or the whole key where
// two axes share it; a "base" axis contributes the config's file stem, an axis of tables naming
// their base its values' labels alone), e.g. "mixers-340m/mixer-gdn_lr-0.001".
// Every run gets the overrides run.dir=DIR/NAME and run.name=<label>, and its process count from
// the resolved config: parallel.tp × parallel.dp (each 1 when absent).
// A relative `base` is taken from the sweep file's directory (configs/sweeps/x.toml names
// "../models/gdn-340m.toml"); a relative `dir` from the current directory. Every error is a
// std::invalid_argument "FILE: sweep.grid.model.mixer: expected ...", naming the key.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "coordinator/run_spec.h"

namespace linea::coordinator {

struct SweepPlan {
  SweepSpec sweep;
  std::vector<RunSpec> runs;  // in a fixed order: the last axis (by key) varies fastest
};

constexpr size_t kMaxSweepRuns = 10000;

SweepPlan expand_sweep_file(const std::string& path);
// `source` names the text in errors; a relative `base` resolves against `sweep_dir` (the sweep
// file's directory), a relative `dir` against `work_dir`.
SweepPlan expand_sweep(std::string_view toml_text, const std::string& source, const std::string& sweep_dir,
                       const std::string& work_dir);

}  // namespace linea::coordinator
