// RunSpec: what the coordinator needs to launch one training run, as submitted by `linea submit`:
// a unique name, the config file and overrides passed to `linea train`, the process count for
// mpirun, and the directory the trainer writes (metrics.jsonl, checkpoints/). SweepSpec names a
// group of runs whose results are summarised together in one directory.
// from_json() validates every field (errors name the field, e.g. "submit.runs[2].processes: ...");
// to_json() is its inverse (used on the wire and in the journal).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace linea::coordinator {

struct RunSpec {
  std::string name;                    // unique id, e.g. "mixers-340m/mixer-gdn_lr-0.001"
  std::string config;                  // absolute path of the TOML config given to `linea train`
  std::vector<std::string> overrides;  // "section.key=value", in order (run.dir and run.name included)
  int64_t processes = 1;               // mpirun -np
  std::string run_dir;                 // absolute: where metrics.jsonl and checkpoints/ appear
  std::string sweep;                   // the sweep it belongs to ("" for none)

  static RunSpec from_json(const nlohmann::json& j, const std::string& path);
  nlohmann::json to_json() const;
};

// A run compared with its matched baseline in the results (final val loss difference), with the
// effect a source reported for that comparison beside it.
struct SweepComparison {
  std::string run, baseline;  // run names
  std::string reported;       // e.g. "≈ −0.01 (seed 000: CLVR at 350M / 1B tokens)"; may be empty
};

struct SweepSpec {
  std::string name;      // unique among sweeps
  std::string dir;       // absolute: summary.md, summary.csv and plots go here
  std::string baseline;  // run name whose throughput normalizes the others ("" → the first run)
  std::vector<SweepComparison> comparisons;

  static SweepSpec from_json(const nlohmann::json& j, const std::string& path);
  nlohmann::json to_json() const;
};

constexpr int64_t kMaxProcessesPerRun = 65536;

// Run names: one or two segments joined by '/', each [A-Za-z0-9][A-Za-z0-9._+-]*, 200 bytes at most.
bool is_valid_run_name(std::string_view name);
// Sweep names: one segment as above.
bool is_valid_sweep_name(std::string_view name);

}  // namespace linea::coordinator
