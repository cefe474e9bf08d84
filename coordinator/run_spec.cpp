#include "coordinator/run_spec.h"

#include <stdexcept>

#include "coordinator/json_fields.h"

namespace linea::coordinator {
namespace {

constexpr size_t kMaxNameBytes = 200;
constexpr size_t kMaxComparisons = 10000;
constexpr size_t kMaxPathBytes = 4096;
constexpr size_t kMaxOverrides = 256;

bool is_valid_segment(std::string_view s) {
  if (s.empty()) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  if (!alnum(s.front())) return false;
  for (char c : s)
    if (!alnum(c) && c != '.' && c != '_' && c != '+' && c != '-') return false;
  return true;
}

std::string absolute_path(const JsonFields& f, std::string_view key) {
  std::string p = f.required_string(key, kMaxPathBytes);
  if (p.front() != '/') f.fail(key, "an absolute path");
  return p;
}

}  // namespace

bool is_valid_run_name(std::string_view name) {
  if (name.size() > kMaxNameBytes) return false;
  const size_t slash = name.find('/');
  if (slash == std::string_view::npos) return is_valid_segment(name);
  return is_valid_segment(name.substr(0, slash)) && is_valid_segment(name.substr(slash + 1));
}

bool is_valid_sweep_name(std::string_view name) { return name.size() <= kMaxNameBytes && is_valid_segment(name); }

RunSpec RunSpec::from_json(const nlohmann::json& j, const std::string& path) {
  const JsonFields f(j, path);
  RunSpec s;
  s.name = f.required_string("name", kMaxNameBytes);
  if (!is_valid_run_name(s.name))
    f.fail("name", "a run name: one or two segments joined by '/', each of [A-Za-z0-9._+-] starting alphanumeric");
  s.config = absolute_path(f, "config");
  s.overrides = f.string_list("overrides", kMaxOverrides);
  for (size_t i = 0; i < s.overrides.size(); ++i) {
    const size_t eq = s.overrides[i].find('=');
    if (eq == 0 || eq == std::string::npos)
      throw std::invalid_argument(f.field_path("overrides") + "[" + std::to_string(i) +
                                  "]: expected \"section.key=value\", got \"" + s.overrides[i].substr(0, 60) + "\"");
  }
  s.processes = f.integer("processes", 1, 1, kMaxProcessesPerRun);
  s.run_dir = absolute_path(f, "run_dir");
  s.sweep = f.string("sweep", "", kMaxNameBytes);
  if (!s.sweep.empty() && !is_valid_sweep_name(s.sweep)) f.fail("sweep", "a sweep name");
  return s;
}

nlohmann::json RunSpec::to_json() const {
  nlohmann::json j = {
      {"name", name}, {"config", config}, {"overrides", overrides}, {"processes", processes}, {"run_dir", run_dir}};
  if (!sweep.empty()) j["sweep"] = sweep;
  return j;
}

SweepSpec SweepSpec::from_json(const nlohmann::json& j, const std::string& path) {
  const JsonFields f(j, path);
  SweepSpec s;
  s.name = f.required_string("name", kMaxNameBytes);
  if (!is_valid_sweep_name(s.name)) f.fail("name", "a sweep name of [A-Za-z0-9._+-] starting alphanumeric");
  s.dir = absolute_path(f, "dir");
  s.baseline = f.string("baseline", "", kMaxNameBytes);
  if (f.has("compare")) {
    const nlohmann::json& list = f.array("compare", kMaxComparisons);
    for (size_t i = 0; i < list.size(); ++i) {
      const JsonFields c(list[i], f.field_path("compare") + "[" + std::to_string(i) + "]");
      s.comparisons.push_back({c.required_string("run", kMaxNameBytes), c.required_string("baseline", kMaxNameBytes),
                               c.string("reported", "", 1024)});
    }
  }
  return s;
}

nlohmann::json SweepSpec::to_json() const {
  nlohmann::json j = {{"name", name}, {"dir", dir}, {"baseline", baseline}};
  if (comparisons.empty()) return j;
  nlohmann::json list = nlohmann::json::array();
  for (const SweepComparison& c : comparisons) {
    list.push_back({{"run", c.run}, {"baseline", c.baseline}, {"reported", c.reported}});
  }
  j["compare"] = list;
  return j;
}

}  // namespace linea::coordinator
