// `linea status`: the coordinator's runs as a table (name, state, step, loss, tokens/s, restarts,
// goodput, ...), or the raw reply with --json.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/command_line.h"
#include "cli/coordinator_connection.h"

namespace linea::cli {
namespace {

const std::string kUsage = std::string(
                               "usage: linea status [--json] [options]\n"
                               "\n"
                               "Prints the coordinator's queue and runs: state, attempt, step, loss, tokens/s,\n"
                               "restarts, goodput (productive / (productive + lost) time), wall time and the last\n"
                               "error.\n"
                               "\n"
                               "options:\n"
                               "  --json                   print the coordinator's reply as JSON\n") +
                           kConnectionOptionsHelp;

std::string cell(const nlohmann::json& v, const char* spec) {
  if (!v.is_number()) return "-";
  const double x = v.get<double>();
  if (!std::isfinite(x)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, x);
  return buf;
}

std::string format_table(const nlohmann::json& runs) {
  const std::vector<std::string> header = {"run",      "state",    "attempt", "step", "loss",
                                           "tokens/s", "restarts", "goodput", "wall", "last error"};
  std::vector<std::vector<std::string>> rows = {header};
  for (const auto& r : runs) {
    const nlohmann::json& acct = r.value("accounting", nlohmann::json::object());
    const int64_t step = r.value("step", int64_t{-1});
    const bool started = r.value("attempt", int64_t{-1}) >= 0;
    std::string error = r.value("last_error", std::string());
    if (error.size() > 60) error = error.substr(0, 57) + "...";
    rows.push_back(
        {r.value("spec", nlohmann::json::object()).value("name", std::string("?")), r.value("state", std::string("?")),
         started ? std::to_string(r.value("attempt", 0)) : "-", step >= 0 ? std::to_string(step) : "-",
         step >= 0 ? cell(r.value("loss", nlohmann::json()), "%.4f") : "-",
         step >= 0 ? cell(r.value("tokens_per_s", nlohmann::json()), "%.0f") : "-",
         std::to_string(acct.value("restarts", 0)), started ? cell(r.value("goodput", 1.0) * 100, "%.1f%%") : "-",
         started ? cell(r.value("wall_s", 0.0), "%.0fs") : "-", error.empty() ? "" : error});
  }
  std::vector<size_t> width(header.size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const bool left = c == 0 || c == 1 || c + 1 == row.size();
      const std::string pad(width[c] - row[c].size(), ' ');
      line += (c ? "  " : "") + (left ? row[c] + pad : pad + row[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

int run_status(int argc, char** argv) {
  CommandLine flags("status", kUsage);
  if (const auto done = with_connection_options(flags).flag("json").parse(argc, argv)) return *done;
  const nlohmann::json reply = CoordinatorConnection::from_flags(flags).request({{"type", "status"}});
  if (flags.has("json")) {
    std::printf("%s\n", reply.dump(2).c_str());
    return 0;
  }
  const nlohmann::json& runs = reply.value("runs", nlohmann::json::array());
  int64_t active = 0;
  for (const auto& r : runs) active += r.value("state", std::string()) == "running";
  std::printf("%zu runs, %lld running, %lld slots%s\n", runs.size(), static_cast<long long>(active),
              static_cast<long long>(reply.value("slots", int64_t{0})),
              reply.value("stopping", false) ? ", stopping" : "");
  if (!runs.empty()) std::fputs(format_table(runs).c_str(), stdout);
  return 0;
}

const CommandRegistration registration({"status", "print the coordinator's runs as a table", run_status});

}  // namespace
}  // namespace linea::cli
