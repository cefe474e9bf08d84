#include "coordinator/sweep.h"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace linea::coordinator {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kSweepKeys[] = {"name", "base", "dir", "baseline", "set", "grid", "compare"};

// One value an axis takes: the overrides it sets and its part of the run label.
struct AxisValue {
  std::vector<std::pair<std::string, const toml::node*>> settings;  // dotted key, value
  std::string label;
  std::string config;  // the run's config file, when the value is a bundle naming its `base`
};

struct Axis {
  std::string key;  // dotted, as written under [sweep.grid]
  std::string label;
  bool bundled = false;     // values are tables of several settings
  bool gives_base = false;  // bundles that each name their run's config file (`base`)
  std::vector<AxisValue> values;
  toml::source_position position;
};

class SweepReader {
 public:
  SweepReader(std::string source, std::string sweep_dir, std::string work_dir)
      : source_(std::move(source)), sweep_dir_(std::move(sweep_dir)), work_dir_(std::move(work_dir)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    throw std::invalid_argument(source_ + ": " + key + ": " + message);
  }

  // A config file (`base`), relative to the sweep file.
  fs::path resolve_config(const std::string& path) const { return resolve(sweep_dir_, path); }
  // The runs' directory (`dir`), relative to the current directory.
  fs::path resolve_output(const std::string& path) const { return resolve(work_dir_, path); }

  SweepPlan read(std::string_view text);

 private:
  void flatten(const toml::table& table, const std::string& prefix, const std::string& where,
               std::vector<std::pair<std::string, const toml::node*>>& out) const;
  std::string label_of(const toml::node& value, const std::string& key) const;
  std::string literal_of(const toml::node& value, const std::string& key) const;
  int64_t processes_for(const fs::path& config, const std::vector<std::string>& overrides,
                        const std::string& run) const;

  std::string source_;
  static fs::path resolve(const std::string& from, const std::string& path) {
    const fs::path p(path);
    return (p.is_absolute() ? p : fs::path(from) / p).lexically_normal();
  }

  std::string sweep_dir_, work_dir_;
};

std::string sanitize(std::string_view text) {
  std::string out;
  for (char c : text) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '+' || c == '-';
    out += ok ? c : '-';
  }
  return out;
}

// The shortest text that reads back as v, with the exponent's leading zeros dropped (3e-4, not 3e-04).
std::string shortest(double v) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string text(buf, ec == std::errc() ? end : buf);
  const size_t e = text.find('e');
  if (e != std::string::npos) {
    const size_t digits = e + 1 + (text[e + 1] == '-' || text[e + 1] == '+');
    while (digits + 1 < text.size() && text[digits] == '0') text.erase(digits, 1);
    if (text[e + 1] == '+') text.erase(e + 1, 1);
  }
  return text;
}

std::string position_text(const toml::source_position& p) {
  return std::to_string(p.line) + ":" + std::to_string(p.column);
}

bool before(const toml::source_position& a, const toml::source_position& b) {
  return a.line != b.line ? a.line < b.line : a.column < b.column;
}

void flatten_into(const toml::table& table, const std::string& prefix,
                  std::vector<std::pair<std::string, const toml::node*>>& out) {
  for (const auto& [key, node] : table) {
    const std::string dotted = prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    if (const toml::table* inner = node.as_table())
      flatten_into(*inner, dotted, out);
    else
      out.emplace_back(dotted, &node);
  }
}

// Keys in the order the file wrote them (toml++ tables iterate in key order).
void sort_by_position(std::vector<std::pair<std::string, const toml::node*>>& items) {
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
    return before(a.second->source().begin, b.second->source().begin);
  });
}

void assign(toml::table& root, const std::string& dotted, const toml::node& value) {
  toml::table* table = &root;
  size_t begin = 0;
  for (size_t dot = dotted.find('.'); dot != std::string::npos; dot = dotted.find('.', begin)) {
    const std::string part = dotted.substr(begin, dot - begin);
    toml::node* child = table->get(part);
    if (!child || !child->is_table()) {
      table->insert_or_assign(part, toml::table{});
      child = table->get(part);
    }
    table = child->as_table();
    begin = dot + 1;
  }
  value.visit([&](const auto& v) { table->insert_or_assign(dotted.substr(begin), v); });
}

}  // namespace

void SweepReader::flatten(const toml::table& table, const std::string& prefix, const std::string& where,
                          std::vector<std::pair<std::string, const toml::node*>>& out) const {
  flatten_into(table, prefix, out);
  sort_by_position(out);
  for (const auto& [key, node] : out)
    if (key.empty()) fail(where, "expected non-empty keys");
}

std::string SweepReader::label_of(const toml::node& value, const std::string& key) const {
  if (const auto* s = value.as_string()) return sanitize(s->get());
  if (const auto* i = value.as_integer()) return std::to_string(i->get());
  if (const auto* f = value.as_floating_point()) return sanitize(shortest(f->get()));
  if (const auto* b = value.as_boolean()) return b->get() ? "true" : "false";
  if (const auto* a = value.as_array()) {
    std::string label;
    for (const toml::node& item : *a) label += (label.empty() ? "" : ".") + label_of(item, key);
    return label;
  }
  fail(key, "expected a string, number, boolean or array value");
}

std::string SweepReader::literal_of(const toml::node& value, const std::string& key) const {
  if (const auto* s = value.as_string()) {  // a TOML basic string
    std::string text = "\"";
    for (unsigned char c : s->get()) {
      if (c == '"' || c == '\\') {
        text += '\\';
        text += static_cast<char>(c);
      } else if (c < 0x20 || c == 0x7f) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
        text += escaped;
      } else {
        text += static_cast<char>(c);
      }
    }
    return text + "\"";
  }
  if (const auto* i = value.as_integer()) return std::to_string(i->get());
  if (const auto* f = value.as_floating_point()) {
    const double v = f->get();
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    std::string text = shortest(v);
    if (text.find_first_of(".e") == std::string::npos) text += ".0";  // stays a float in TOML
    return text;
  }
  if (const auto* b = value.as_boolean()) return b->get() ? "true" : "false";
  if (const auto* a = value.as_array()) {
    std::string text = "[";
    for (const toml::node& item : *a) text += (text.size() > 1 ? ", " : "") + literal_of(item, key);
    return text + "]";
  }
  fail(key, "expected a string, number, boolean or array value (dates and tables cannot be overrides)");
}

int64_t SweepReader::processes_for(const fs::path& config, const std::vector<std::string>& overrides,
                                   const std::string& run) const {
  toml::table resolved;
  try {
    resolved = toml::parse_file(config.string());
  } catch (const toml::parse_error& e) {
    fail("sweep.base", "cannot read " + config.string() + " (line " + position_text(e.source().begin) +
                           "): " + std::string(e.description()));
  }
  for (const std::string& assignment : overrides) {
    const size_t eq = assignment.find('=');
    toml::table parsed;
    try {
      parsed = toml::parse("v = " + assignment.substr(eq + 1));
    } catch (const toml::parse_error&) {
      continue;  // a bare word: a string to the trainer, never a process count
    }
    assign(resolved, assignment.substr(0, eq), *parsed.get("v"));
  }
  int64_t processes = 1;
  for (const char* key : {"parallel.tp", "parallel.dp"}) {
    const toml::node_view<toml::node> node = resolved.at_path(key);
    if (!node) continue;
    const auto value = node.value<int64_t>();
    if (!node.is_integer() || !value || *value < 1 || *value > kMaxProcessesPerRun)
      fail(key, "run " + run + ": expected an integer in [1, " + std::to_string(kMaxProcessesPerRun) + "]");
    processes *= *value;
  }
  if (processes > kMaxProcessesPerRun)
    fail("parallel", "run " + run + ": parallel.tp × parallel.dp = " + std::to_string(processes) + " is too many");
  return processes;
}

SweepPlan SweepReader::read(std::string_view text) {
  toml::table root;
  try {
    root = toml::parse(text, source_);
  } catch (const toml::parse_error& e) {
    throw std::invalid_argument(source_ + ":" + position_text(e.source().begin) + ": " + std::string(e.description()));
  }
  for (const auto& [key, node] : root)
    if (key.str() != "sweep")
      throw std::invalid_argument(source_ + ": unknown key '" + std::string(key.str()) +
                                  "' (a sweep file holds only the [sweep] table)");
  const toml::table* sweep = root["sweep"].as_table();
  if (!sweep) fail("sweep", "expected a [sweep] table");
  for (const auto& [key, node] : *sweep)
    if (std::find(std::begin(kSweepKeys), std::end(kSweepKeys), key.str()) == std::end(kSweepKeys))
      throw std::invalid_argument(source_ + ": unknown key 'sweep." + std::string(key.str()) +
                                  "' (expected name, base, dir, baseline, set, grid or compare)");
  auto string_field = [&](const char* key, std::string fallback) {
    const toml::node* node = sweep->get(key);
    if (!node) return fallback;
    const auto* s = node->as_string();
    if (!s || s->get().empty()) fail(std::string("sweep.") + key, "expected a non-empty string");
    return s->get();
  };

  SweepPlan plan;
  plan.sweep.name = string_field("name", fs::path(source_).stem().string());
  if (!is_valid_sweep_name(plan.sweep.name))
    fail("sweep.name", "expected a name of [A-Za-z0-9._+-] starting alphanumeric, got \"" + plan.sweep.name + "\"");
  const fs::path dir = resolve_output(string_field("dir", "runs"));
  plan.sweep.dir = (dir / plan.sweep.name).string();
  const std::string base = string_field("base", "");
  const std::string baseline = string_field("baseline", "");

  std::vector<std::pair<std::string, const toml::node*>> fixed;
  if (const toml::node* set = sweep->get("set")) {
    if (!set->is_table()) fail("sweep.set", "expected a table of \"section.key\" = value");
    flatten(*set->as_table(), "", "sweep.set", fixed);
  }
  for (const auto& [key, node] : fixed) literal_of(*node, "sweep.set." + key);

  std::vector<std::pair<std::string, const toml::node*>> grid_items;
  if (const toml::node* grid = sweep->get("grid")) {
    if (!grid->is_table()) fail("sweep.grid", "expected a table of \"section.key\" = [values]");
    flatten(*grid->as_table(), "", "sweep.grid", grid_items);
  }
  std::vector<Axis> axes;
  std::set<std::string> set_keys;
  for (const auto& [key, node] : fixed) set_keys.insert(key);
  for (const auto& [key, node] : grid_items) {
    const std::string where = "sweep.grid." + key;
    const toml::array* values = node->as_array();
    if (!values || values->empty()) fail(where, "expected a non-empty array of values");
    Axis axis{key, key.substr(key.rfind('.') + 1), false, false, {}, node->source().begin};
    axis.bundled = values->front().is_table();
    for (const toml::node& value : *values) {
      if (value.is_table() != axis.bundled)
        fail(where, "expected values that are all tables (keys set together) or all plain values");
      AxisValue v;
      if (axis.bundled) {
        flatten(*value.as_table(), "", where, v.settings);
        std::string given_label;
        for (auto it = v.settings.begin(); it != v.settings.end();) {
          if (it->first != "label" && it->first != "base") {
            ++it;
            continue;
          }
          const auto* text = it->second->as_string();
          if (!text || sanitize(text->get()).empty()) {
            fail(where + "." + it->first,
                 it->first == "base" ? "expected a config file path" : "expected a non-empty string");
          }
          if (it->first == "base") {
            v.config = text->get();
          } else {
            given_label = sanitize(text->get());
          }
          it = v.settings.erase(it);
        }
        if (&value != &values->front() && v.config.empty() == axis.gives_base) {
          fail(where, "expected every table of the axis to name its `base` config, or none");
        }
        axis.gives_base = !v.config.empty();
        if (v.settings.empty() && !axis.gives_base) {
          fail(where, "expected tables with at least one \"section.key\" = value");
        }
        for (const auto& [k, setting] : v.settings) v.label += (v.label.empty() ? "" : "-") + label_of(*setting, where);
        if (axis.gives_base) {
          const std::string stem = sanitize(fs::path(v.config).stem().string());
          v.label = v.label.empty() ? stem : stem + "-" + v.label;
        }
        if (!given_label.empty()) v.label = given_label;
      } else {
        v.settings.emplace_back(key, &value);
        v.label = label_of(value, where);
      }
      for (const auto& [k, setting] : v.settings) {
        literal_of(*setting, where);
        if (set_keys.count(k)) fail(where, "sets " + k + ", which sweep.set also sets");
        if (key == "base" && !axis.bundled && !setting->is_string()) fail(where, "expected config file paths");
      }
      axis.values.push_back(std::move(v));
    }
    axes.push_back(std::move(axis));
  }
  // Axes that share a last component are labelled by their whole key.
  std::map<std::string, int> label_count;
  for (const Axis& a : axes) ++label_count[a.label];
  for (Axis& a : axes)
    if (label_count[a.label] > 1) a.label = sanitize(a.key);

  const auto gives_base = [](const Axis& a) { return a.key == "base" || a.gives_base; };
  const bool base_axis = std::any_of(axes.begin(), axes.end(), gives_base);
  if (std::count_if(axes.begin(), axes.end(), gives_base) > 1) {
    fail("sweep.grid", "expected at most one axis that gives the runs' base config");
  }
  if (base_axis && !base.empty()) fail("sweep.grid.base", "conflicts with sweep.base: give one or the other");
  if (!base_axis && base.empty()) fail("sweep.base", "expected the path of the config file every run starts from");

  size_t total = 1;
  for (const Axis& a : axes) {
    total *= a.values.size();
    if (total > kMaxSweepRuns)
      fail("sweep.grid", "expected at most " + std::to_string(kMaxSweepRuns) + " runs in the product of the axes");
  }
  std::map<std::string, std::string> names;  // run name → the values that gave it
  for (size_t index = 0; index < total; ++index) {
    std::vector<size_t> pick(axes.size());
    for (size_t k = axes.size(), rest = index; k-- > 0;) {
      pick[k] = rest % axes[k].values.size();
      rest /= axes[k].values.size();
    }
    std::string label, config = base, described;
    std::vector<std::string> overrides;
    for (const auto& [key, node] : fixed) overrides.push_back(key + "=" + literal_of(*node, "sweep.set." + key));
    for (size_t k = 0; k < axes.size(); ++k) {
      const Axis& axis = axes[k];
      const AxisValue& value = axis.values[pick[k]];
      described += (described.empty() ? "" : ", ") + axis.key + " #" + std::to_string(pick[k] + 1);
      if (axis.key == "base") {
        config = value.settings.front().second->as_string()->get();
        label += (label.empty() ? "" : "_") + sanitize(fs::path(config).stem().string());
        continue;
      }
      if (axis.gives_base) config = value.config;
      // A bundle naming its base config is labelled like a base axis: by its value alone.
      label += (label.empty() ? "" : "_") + (axis.gives_base ? value.label : axis.label + "-" + value.label);
      for (const auto& [key, node] : value.settings) overrides.push_back(key + "=" + literal_of(*node, key));
    }
    if (label.empty()) label = "run";
    RunSpec run;
    run.name = plan.sweep.name + "/" + label;
    if (!is_valid_run_name(run.name))
      fail("sweep.grid", "the run name \"" + run.name + "\" (from " + described +
                             ") is not a valid name (at most 200 characters of [A-Za-z0-9._+-]); shorten the values");
    if (auto [it, fresh] = names.emplace(run.name, described); !fresh)
      fail("sweep.grid", "two runs get the name \"" + run.name + "\" (" + it->second + " and " + described +
                             "): their values differ only in characters a name cannot hold");
    const fs::path config_path = resolve_config(config);
    if (!fs::is_regular_file(config_path))
      fail(base_axis ? "sweep.grid.base" : "sweep.base", "no config file at " + config_path.string());
    run.config = config_path.string();
    overrides.push_back("run.dir=" + literal_of(toml::value<std::string>(plan.sweep.dir), "run.dir"));
    overrides.push_back("run.name=" + literal_of(toml::value<std::string>(label), "run.name"));
    run.overrides = std::move(overrides);
    run.processes = processes_for(config_path, run.overrides, run.name);
    run.run_dir = (fs::path(plan.sweep.dir) / label).string();
    run.sweep = plan.sweep.name;
    plan.runs.push_back(std::move(run));
  }
  // A label (or run name) of one of the runs, as a run name.
  const auto run_named = [&](const std::string& label, const std::string& where) {
    const std::string name = label.find('/') == std::string::npos ? plan.sweep.name + "/" + label : label;
    if (!names.count(name)) {
      std::string known;
      for (const auto& [n, described] : names) known += (known.empty() ? "" : ", ") + n.substr(n.find('/') + 1);
      fail(where, "expected the label of one of the runs (" + known.substr(0, 400) + "), got \"" + label + "\"");
    }
    return name;
  };
  if (!baseline.empty()) plan.sweep.baseline = run_named(baseline, "sweep.baseline");
  // [[sweep.compare]] (or compare = [{…}, …]): run, baseline, optional reported.
  if (const toml::node* compare = sweep->get("compare")) {
    const toml::array* list = compare->as_array();
    if (!list) fail("sweep.compare", "expected an array of {run, baseline, reported} tables");
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string where = "sweep.compare[" + std::to_string(i) + "]";
      const toml::table* t = list->get(i)->as_table();
      if (!t) fail(where, "expected a table {run = LABEL, baseline = LABEL, reported = TEXT}");
      SweepComparison c;
      for (const auto& [key, node] : *t) {
        const std::string k(key.str());
        const auto* text = node.as_string();
        if (k != "run" && k != "baseline" && k != "reported")
          fail(where + "." + k, "expected run, baseline or reported");
        if (!text || (k != "reported" && text->get().empty())) fail(where + "." + k, "expected a non-empty string");
        if (k == "run") c.run = run_named(text->get(), where + ".run");
        if (k == "baseline") c.baseline = run_named(text->get(), where + ".baseline");
        if (k == "reported") c.reported = text->get();
      }
      if (c.run.empty()) fail(where + ".run", "expected the label of the run to compare");
      if (c.baseline.empty()) fail(where + ".baseline", "expected the label of its matched baseline");
      plan.sweep.comparisons.push_back(std::move(c));
    }
  }
  return plan;
}

SweepPlan expand_sweep(std::string_view toml_text, const std::string& source, const std::string& sweep_dir,
                       const std::string& work_dir) {
  return SweepReader(source, sweep_dir, work_dir).read(toml_text);
}

SweepPlan expand_sweep_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(path + ": cannot open the sweep file");
  std::stringstream text;
  text << in.rdbuf();
  return expand_sweep(text.str(), path, fs::absolute(path).parent_path().string(), fs::current_path().string());
}

}  // namespace linea::coordinator
