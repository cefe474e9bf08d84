#include "coordinator/results.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "coordinator/eval_results.h"
#include "coordinator/journal.h"
#include "coordinator/json_fields.h"
#include "coordinator/metrics_log.h"
#include "coordinator/svg_plot.h"
#include "data/atomic_file.h"

namespace linea::coordinator {
namespace {

constexpr size_t kMaxRuns = 1 << 20;

struct Manifest {
  std::string name;
  std::string baseline;
  std::vector<std::pair<std::string, std::string>> runs;  // name, run_dir
  std::vector<SweepComparison> comparisons;
};

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) throw std::runtime_error(path + ": expected a JSON document");
  return j;
}

Manifest read_manifest(const std::string& sweep_dir) {
  const std::string path = sweep_dir + "/sweep.json";
  const nlohmann::json j = read_json_file(path);
  try {
    const JsonFields f(j, path);
    Manifest m{f.required_string("name", 256), f.string("baseline", "", 256), {}, {}};
    const nlohmann::json& runs = f.array("runs", kMaxRuns);
    for (size_t i = 0; i < runs.size(); ++i) {
      const JsonFields r(runs[i], path + ": runs[" + std::to_string(i) + "]");
      m.runs.emplace_back(r.required_string("name", 256), r.required_string("run_dir"));
    }
    if (f.has("compare")) {
      const nlohmann::json& list = f.array("compare", kMaxRuns);
      for (size_t i = 0; i < list.size(); ++i) {
        const JsonFields c(list[i], path + ": compare[" + std::to_string(i) + "]");
        m.comparisons.push_back(
            {c.required_string("run", 256), c.required_string("baseline", 256), c.string("reported", "", 1024)});
      }
    }
    return m;
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
}

std::optional<double> median(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  double m = values[mid];
  if (values.size() % 2 == 0)
    m = (m + *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
  return m;
}

// The run name without its sweep prefix ("sweep/label" → "label").
std::string short_name(const std::string& name) {
  const size_t slash = name.find('/');
  return slash == std::string::npos ? name : name.substr(slash + 1);
}

std::string format(const std::optional<double>& v, const char* spec, const char* missing) {
  if (!v || !std::isfinite(*v)) return missing;
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, *v);
  return buf;
}

}  // namespace

void write_sweep_manifest(const SweepSpec& sweep, const std::vector<RunSpec>& runs) {
  const std::string path = sweep.dir + "/sweep.json";
  if (std::filesystem::exists(path))
    throw std::runtime_error(path + " already exists: that directory holds another sweep (choose another name or dir)");
  std::error_code ec;
  std::filesystem::create_directories(sweep.dir, ec);
  if (ec) throw std::runtime_error("cannot create " + sweep.dir + ": " + ec.message());
  nlohmann::json list = nlohmann::json::array();
  for (const RunSpec& r : runs)
    list.push_back({{"name", r.name},
                    {"run_dir", r.run_dir},
                    {"config", r.config},
                    {"overrides", r.overrides},
                    {"processes", r.processes}});
  nlohmann::json manifest{{"name", sweep.name}, {"baseline", sweep.baseline}, {"runs", list}};
  if (!sweep.comparisons.empty()) manifest["compare"] = sweep.to_json()["compare"];
  data::write_file_atomically(path, manifest.dump(2) + "\n");
}

std::vector<ComparisonResult> compare_with_baselines(const std::vector<SweepComparison>& comparisons,
                                                     const std::vector<RunResult>& results) {
  const auto val_loss = [&](const std::string& name) -> std::optional<double> {
    for (const RunResult& r : results) {
      if (r.name == name) return r.final_val_loss;
    }
    return std::nullopt;
  };
  std::vector<ComparisonResult> out;
  for (const SweepComparison& c : comparisons) {
    ComparisonResult r{c, val_loss(c.run), val_loss(c.baseline), std::nullopt};
    if (r.val_loss && r.baseline_val_loss) r.difference = *r.val_loss - *r.baseline_val_loss;
    out.push_back(std::move(r));
  }
  return out;
}

std::string format_comparisons_markdown(const std::vector<ComparisonResult>& comparisons) {
  std::string md = "\n## Against matched baselines\n\n";
  md += "| run | baseline | final val loss | baseline's | difference | reported |\n";
  md += "|---|---|---:|---:|---:|---|\n";
  for (const ComparisonResult& c : comparisons) {
    md += "| " + short_name(c.comparison.run) + " | " + short_name(c.comparison.baseline) + " | " +
          format(c.val_loss, "%.4f", "—") + " | " + format(c.baseline_val_loss, "%.4f", "—") + " | " +
          format(c.difference, "%+.4f", "—") + " | " + (c.comparison.reported.empty() ? "—" : c.comparison.reported) +
          " |\n";
  }
  return md;
}

std::vector<RunResult> collect_sweep_results(const std::string& sweep_dir) {
  const Manifest manifest = read_manifest(sweep_dir);
  std::vector<RunResult> results;
  std::optional<double> baseline_tps;
  for (const auto& [name, run_dir] : manifest.runs) {
    RunResult r;
    r.name = name;
    r.state = "unknown";
    const MetricsLog log = read_metrics_log(run_dir + "/metrics.jsonl");
    if (!log.points.empty()) {
      r.steps = log.points.back().step;
      if (std::isfinite(log.points.back().loss)) r.final_loss = log.points.back().loss;
    }
    std::vector<double> tps, step_time;
    for (size_t i = 0; i < log.points.size(); ++i) {
      const MetricsPoint& p = log.points[i];
      if (p.val_loss) r.final_val_loss = p.val_loss;
      if (2 * i < log.points.size()) continue;  // the second half: past warm-up and compilation
      if (std::isfinite(p.tokens_per_s)) tps.push_back(p.tokens_per_s);
      if (const auto t = p.iteration_time_s()) step_time.push_back(*t);
    }
    r.tokens_per_s = median(tps);
    r.iteration_time_s = median(step_time);
    const std::string accounting = run_dir + "/coordinator.json";
    if (std::filesystem::exists(accounting)) {
      const nlohmann::json j = read_json_file(accounting);
      try {
        const JsonFields f(j, accounting);
        r.state = f.string("state", "unknown", 64);
        const JsonFields a = f.object("accounting");
        r.restarts = a.required_integer("restarts", 0, int64_t{1} << 40);
        r.goodput = f.optional_number("goodput");
        r.wall_s = f.optional_number("wall_s");
      } catch (const std::invalid_argument& e) {
        throw std::runtime_error(e.what());
      }
    }
    if (name == manifest.baseline || (manifest.baseline.empty() && results.empty())) baseline_tps = r.tokens_per_s;
    results.push_back(std::move(r));
  }
  for (RunResult& r : results)
    if (r.tokens_per_s && baseline_tps && *baseline_tps > 0) r.normalized_throughput = *r.tokens_per_s / *baseline_tps;
  return results;
}

std::string format_results_markdown(const std::string& sweep_name, const std::vector<RunResult>& results) {
  std::string md = "# Sweep " + sweep_name + "\n\n";
  md +=
      "| run | state | steps | final loss | final val loss | tokens/s | normalized throughput | iteration time (s) | "
      "restarts | goodput | wall time (s) |\n";
  md += "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const RunResult& r : results) {
    md += "| " + short_name(r.name) + " | " + r.state + " | " + std::to_string(r.steps) + " | " +
          format(r.final_loss, "%.4f", "—") + " | " + format(r.final_val_loss, "%.4f", "—") + " | " +
          format(r.tokens_per_s, "%.0f", "—") + " | " + format(r.normalized_throughput, "%.3f", "—") + " | " +
          format(r.iteration_time_s, "%.4f", "—") + " | " + std::to_string(r.restarts) + " | " +
          format(r.goodput ? std::optional<double>(*r.goodput * 100) : std::nullopt, "%.1f%%", "—") + " | " +
          format(r.wall_s, "%.0f", "—") + " |\n";
  }
  return md;
}

std::string format_results_csv(const std::vector<RunResult>& results) {
  std::string csv =
      "run,state,steps,final_loss,final_val_loss,tokens_per_s,normalized_throughput,iteration_time_s,restarts,"
      "goodput,wall_s\n";
  for (const RunResult& r : results) {
    csv += r.name + "," + r.state + "," + std::to_string(r.steps) + "," + format(r.final_loss, "%.6g", "") + "," +
           format(r.final_val_loss, "%.6g", "") + "," + format(r.tokens_per_s, "%.6g", "") + "," +
           format(r.normalized_throughput, "%.6g", "") + "," + format(r.iteration_time_s, "%.6g", "") + "," +
           std::to_string(r.restarts) + "," + format(r.goodput, "%.6g", "") + "," + format(r.wall_s, "%.6g", "") + "\n";
  }
  return csv;
}

std::vector<std::string> write_sweep_results(const std::string& sweep_dir) {
  const Manifest manifest = read_manifest(sweep_dir);
  const std::vector<RunResult> results = collect_sweep_results(sweep_dir);
  std::vector<PlotSeries> loss, val_loss;
  bool any_val = false;
  for (const auto& [name, run_dir] : manifest.runs) {
    const MetricsLog log = read_metrics_log(run_dir + "/metrics.jsonl");
    PlotSeries train{short_name(name), {}, {}}, val{short_name(name), {}, {}};
    for (const MetricsPoint& p : log.points) {
      train.x.push_back(static_cast<double>(p.step));
      train.y.push_back(p.loss);
      if (p.val_loss) {
        val.x.push_back(static_cast<double>(p.step));
        val.y.push_back(*p.val_loss);
        any_val = true;
      }
    }
    loss.push_back(std::move(train));
    val_loss.push_back(std::move(val));
  }
  std::vector<std::string> written;
  auto write = [&](const std::string& file, const std::string& content) {
    data::write_file_atomically(sweep_dir + "/" + file, content);
    written.push_back(sweep_dir + "/" + file);
  };
  std::string summary = format_results_markdown(manifest.name, results);
  if (!manifest.comparisons.empty()) {
    summary += format_comparisons_markdown(compare_with_baselines(manifest.comparisons, results));
  }
  write("summary.md", summary + format_eval_markdown(manifest.runs));
  write("summary.csv", format_results_csv(results));
  write("loss.svg", render_line_plot({manifest.name + ": training loss", "step", "loss"}, loss));
  if (any_val)
    write("val_loss.svg", render_line_plot({manifest.name + ": validation loss", "step", "val loss"}, val_loss));
  return written;
}

}  // namespace linea::coordinator
