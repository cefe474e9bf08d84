// An evaluation: the tasks a list names, run against a LanguageModel with the run's tokenizer.
// Task names are lm-eval-harness's (arc_challenge, arc_easy, hellaswag, piqa, winogrande,
// openbookqa, lambada_openai), RULER's (ruler_tasks.h) and mqar. A list is comma-separated; an
// entry that is no task's name selects every task it is a prefix of (niah_single → the three
// niah_single_*, arc → both ARC sets); `ruler` selects the RULER tasks, with qa_synthetic in place
// of qa_1 / qa_2 when DATA_DIR lacks their files. RULER tasks run at every context length.
#pragma once
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "eval/task_result.h"
#include "inference/language_model.h"

namespace linea::eval {

// Every task name, in the order evaluations run them.
std::vector<std::string> all_task_names();

// Throws std::invalid_argument naming the entry when it selects no task.
std::vector<std::string> select_tasks(const std::string& list, const std::filesystem::path& data_dir);

struct EvalSettings {
  std::string tasks;
  int64_t limit = 0;  // items of a data set / samples of a synthetic task (0: all items, 100 samples)
  std::filesystem::path data_dir = "data/eval";
  std::vector<int64_t> context_lengths = {4096};
  uint64_t seed = 42;
  int64_t mqar_seq_len = 256, mqar_pairs = 16;
};

// One result per task (per task and context length for RULER's). Writes a line per result to
// `log` as it goes.
std::vector<TaskResult> run_evaluation(const EvalSettings& settings, inference::LanguageModel& model,
                                       const data::Tokenizer& tokenizer, std::ostream& log);

// "arc_easy: acc 0.2500 ± 0.1306, acc_norm ..." for a log line.
std::string describe(const TaskResult& result);

}  // namespace linea::eval
