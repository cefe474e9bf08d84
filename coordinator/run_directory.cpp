#include "coordinator/run_directory.h"

#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "coordinator/metrics_log.h"

namespace linea::coordinator {
namespace {

namespace fs = std::filesystem;

// "step-000000123" → 123 (at least 9 digits, as the checkpoint writer names them).
std::optional<int64_t> checkpoint_step(const std::string& name) {
  constexpr std::string_view kPrefix = "step-";
  if (name.size() < kPrefix.size() + 9 || name.compare(0, kPrefix.size(), kPrefix) != 0) return std::nullopt;
  const std::string digits = name.substr(kPrefix.size());
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(digits);
}

}  // namespace

std::optional<int64_t> newest_committed_checkpoint(const std::string& run_dir) {
  std::optional<int64_t> newest;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(run_dir) / "checkpoints", ec)) {
    const auto step = checkpoint_step(entry.path().filename().string());
    if (step && fs::exists(entry.path() / "COMMITTED") && (!newest || *step > *newest)) newest = step;
  }
  return newest;
}

std::optional<int64_t> configured_last_step(const std::string& run_dir) {
  const fs::path path = fs::path(run_dir) / "config.toml";
  if (!fs::exists(path)) return std::nullopt;
  toml::table config;
  try {
    config = toml::parse_file(path.string());
  } catch (const toml::parse_error& e) {
    throw std::runtime_error(path.string() + ": " + std::string(e.description()));
  }
  const std::optional<int64_t> steps = config.at_path("train.steps").value<int64_t>();
  if (!steps) return std::nullopt;
  const int64_t stop_at = config.at_path("train.stop_at").value<int64_t>().value_or(0);
  return stop_at > 0 ? std::min(stop_at, *steps) : *steps;
}

bool run_finished(const std::string& run_dir) {
  if (read_metrics_log(run_dir + "/metrics.jsonl").finished) return true;
  const std::optional<int64_t> last = configured_last_step(run_dir);
  const std::optional<int64_t> committed = newest_committed_checkpoint(run_dir);
  return last && committed && *committed >= *last;
}

}  // namespace linea::coordinator
