#include "coordinator/eval_results.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

namespace linea::coordinator {
namespace {

using Values = std::map<std::string, double>;  // column → value

Values read_run(const std::string& run_dir) {
  Values values;
  const std::string eval_file = run_dir + "/eval.jsonl";
  std::ifstream eval(eval_file);
  std::string text;
  for (int64_t line = 1; eval && std::getline(eval, text); ++line) {
    if (text.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object() || !j.contains("task") || !j["task"].is_string()) {
      throw std::runtime_error(eval_file + ":" + std::to_string(line) + ": expected a JSON object with a \"task\"");
    }
    std::string task = j["task"].get<std::string>();
    if (j.contains("context_length")) task += "@" + j["context_length"].dump();
    for (const char* metric : {"acc", "acc_norm", "score", "answer_nll", "answer_greedy", "perplexity"}) {
      if (j.contains(metric) && j[metric].is_number()) values[task + " " + metric] = j[metric].get<double>();
    }
  }
  std::ifstream metrics(run_dir + "/metrics.jsonl");
  while (metrics && std::getline(metrics, text)) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_object() && j.contains("val_acc") && j["val_acc"].is_number())
      values["val_acc"] = j["val_acc"].get<double>();
  }
  return values;
}

}  // namespace

std::string format_eval_markdown(const std::vector<std::pair<std::string, std::string>>& runs) {
  std::vector<Values> rows;
  std::set<std::string> columns;
  for (const auto& run : runs) {
    rows.push_back(read_run(run.second));
    for (const auto& entry : rows.back()) columns.insert(entry.first);
  }
  if (columns.empty()) return "";
  std::string md = "\n## Evaluation\n\n| run |";
  for (const std::string& c : columns) md += " " + c + " |";
  md += "\n|---|";
  for (size_t i = 0; i < columns.size(); ++i) md += "---:|";
  md += "\n";
  for (size_t r = 0; r < runs.size(); ++r) {
    md += "| " + runs[r].first + " |";
    for (const std::string& c : columns) {
      const auto it = rows[r].find(c);
      char buf[32] = "—";
      if (it != rows[r].end()) std::snprintf(buf, sizeof buf, "%.4g", it->second);
      md += std::string(" ") + buf + " |";
    }
    md += "\n";
  }
  return md;
}

}  // namespace linea::coordinator
