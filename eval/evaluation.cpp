#include "eval/evaluation.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "eval/lm_eval_layouts.h"
#include "eval/loglikelihood_scoring.h"
#include "eval/mqar_task.h"
#include "eval/recall_scoring.h"
#include "eval/ruler_qa_documents.h"
#include "eval/ruler_tasks.h"
#include "eval/vocabulary_words.h"

namespace linea::eval {

std::vector<std::string> all_task_names() {
  std::vector<std::string> names = multiple_choice_task_names();
  names.push_back("lambada_openai");
  names.insert(names.end(), ruler_task_names().begin(), ruler_task_names().end());
  names.push_back("mqar");
  return names;
}

std::vector<std::string> select_tasks(const std::string& list, const std::filesystem::path& data_dir) {
  const std::vector<std::string> names = all_task_names();
  std::vector<std::string> chosen;
  auto add = [&](const std::string& name) {
    if (std::find(chosen.begin(), chosen.end(), name) == chosen.end()) chosen.push_back(name);
  };
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string entry = list.substr(start, comma - start);
    start = comma + 1;
    if (entry.empty()) continue;
    if (entry == "ruler") {
      bool synthetic_qa = false;
      for (const std::string& t : ruler_task_names()) {
        if ((t == "qa_1" || t == "qa_2") && !std::filesystem::exists(qa_file(data_dir, t))) {
          synthetic_qa = true;
        } else if (t != "qa_synthetic" || synthetic_qa) {
          add(t);
        }
      }
      continue;
    }
    const size_t before = chosen.size();
    if (std::find(names.begin(), names.end(), entry) != names.end()) {
      add(entry);
    } else {
      for (const std::string& t : names) {
        if (t.rfind(entry, 0) == 0) add(t);
      }
    }
    if (chosen.size() == before && std::find(chosen.begin(), chosen.end(), entry) == chosen.end()) {
      std::string known;
      for (const std::string& t : names) known += (known.empty() ? "" : ", ") + t;
      throw std::invalid_argument("--tasks: \"" + entry + "\" is no task and no prefix of one (tasks: " + known +
                                  "; groups: ruler and any prefix)");
    }
  }
  if (chosen.empty()) throw std::invalid_argument("--tasks: no task named");
  return chosen;
}

std::string describe(const TaskResult& r) {
  std::string s = r.task;
  if (r.context_length > 0) s += " @" + std::to_string(r.context_length);
  s += " (" + std::to_string(r.samples) + "):";
  for (const auto& [name, m] : r.metrics) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " %s %.4f ± %.4f", name.c_str(), m.value, m.stderr_);
    s += buf;
  }
  return s;
}

std::vector<TaskResult> run_evaluation(const EvalSettings& s, inference::LanguageModel& model,
                                       const data::Tokenizer& tokenizer, std::ostream& log) {
  if (tokenizer.vocab_size() > model.vocab_size()) {
    throw std::invalid_argument("the tokenizer has " + std::to_string(tokenizer.vocab_size()) +
                                " ids but the model only " + std::to_string(model.vocab_size()));
  }
  const std::vector<std::string> tasks = select_tasks(s.tasks, s.data_dir);
  const int64_t samples = s.limit > 0 ? s.limit : 100;
  std::vector<VocabularyWord> words;
  std::vector<TaskResult> results;
  auto report = [&](TaskResult r) {
    log << describe(r) << "\n" << std::flush;
    results.push_back(std::move(r));
  };
  for (const std::string& task : tasks) {
    if ((is_ruler_task(task) || task == "mqar") && words.empty()) words = vocabulary_words(tokenizer);
    if (is_multiple_choice_task(task)) {
      report(score_multiple_choice(task, read_multiple_choice_task(task, s.data_dir, s.limit), model, tokenizer));
    } else if (task == "lambada_openai") {
      report(score_last_word(task, read_lambada(s.data_dir, s.limit), model, tokenizer));
    } else if (task == "mqar") {
      report(score_mqar({s.mqar_seq_len, s.mqar_pairs, samples, s.seed}, words, model));
    } else {
      for (int64_t length : s.context_lengths) {
        const RulerSettings rs{length, samples, s.seed, s.data_dir};
        report(score_recall(task, length, generate_ruler_samples(task, rs, tokenizer, words), model, tokenizer));
      }
    }
  }
  return results;
}

}  // namespace linea::eval
