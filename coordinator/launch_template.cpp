#include "coordinator/launch_template.h"

#include <sstream>
#include <stdexcept>

namespace linea::coordinator {
namespace {

constexpr std::string_view kWholeWord[] = {"{linea}", "{config}", "{overrides}", "{hostfile}"};
constexpr std::string_view kInline[] = {"{np}", "{run}", "{run_dir}", "{attempt}"};

void replace_all(std::string& word, std::string_view placeholder, const std::string& value) {
  for (size_t at = word.find(placeholder); at != std::string::npos; at = word.find(placeholder, at + value.size()))
    word.replace(at, placeholder.size(), value);
}

void validate_words(const std::vector<std::string>& words, std::string_view which) {
  if (words.empty())
    throw std::invalid_argument(std::string(which) + " launch template: expected a command, got nothing");
  for (const std::string& word : words) {
    std::string rest = word;
    for (std::string_view p : kInline) replace_all(rest, p, "");
    bool whole = false;
    for (std::string_view p : kWholeWord) whole = whole || rest == p;
    if (!whole && rest.find('{') != std::string::npos)
      throw std::invalid_argument(std::string(which) + " launch template: unknown or misplaced placeholder in \"" +
                                  word +
                                  "\" (known: {linea} {config} {overrides} {hostfile} as whole words; {np} "
                                  "{run} {run_dir} {attempt} anywhere)");
  }
}

}  // namespace

LaunchTemplate LaunchTemplate::defaults() {
  LaunchTemplate t;
  t.single_process = {"{linea}", "train", "{config}", "{overrides}"};
  t.multi_process = {"mpirun",
                     "--oversubscribe",
                     "--allow-run-as-root",
                     "--bind-to",
                     "none",
                     "-np",
                     "{np}",
                     "{hostfile}",
                     "-x",
                     "LINEA_COORDINATOR",
                     "-x",
                     "LINEA_COORDINATOR_TOKEN_FILE",
                     "-x",
                     "LINEA_RUN_ID",
                     "-x",
                     "LINEA_ATTEMPT",
                     "{linea}",
                     "train",
                     "{config}",
                     "{overrides}"};
  return t;
}

LaunchTemplate LaunchTemplate::uniform(std::string_view command) {
  std::istringstream in{std::string(command)};
  LaunchTemplate t;
  for (std::string word; in >> word;) t.single_process.push_back(word);
  t.multi_process = t.single_process;
  return t;
}

void LaunchTemplate::validate() const {
  validate_words(single_process, "single-process");
  validate_words(multi_process, "multi-process");
}

std::vector<std::string> LaunchTemplate::expand(const RunSpec& run, int64_t attempt, const std::string& linea_binary,
                                                const std::string& hostfile) const {
  std::vector<std::string> argv;
  for (std::string word : run.processes == 1 ? single_process : multi_process) {
    if (word == "{overrides}") {
      argv.insert(argv.end(), run.overrides.begin(), run.overrides.end());
    } else if (word == "{hostfile}") {
      if (!hostfile.empty()) argv.insert(argv.end(), {"--hostfile", hostfile});
    } else if (word == "{linea}") {
      argv.push_back(linea_binary);
    } else if (word == "{config}") {
      argv.push_back(run.config);
    } else {
      replace_all(word, "{np}", std::to_string(run.processes));
      replace_all(word, "{run}", run.name);
      replace_all(word, "{run_dir}", run.run_dir);
      replace_all(word, "{attempt}", std::to_string(attempt));
      argv.push_back(std::move(word));
    }
  }
  return argv;
}

}  // namespace linea::coordinator
