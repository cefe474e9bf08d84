// Scoring of lm-eval's log-likelihood tasks through LanguageModel::score.
//   Multiple choice: acc = [argmax_i ll_i = gold], acc_norm = [argmax_i ll_i / norm_bytes_i = gold]
//   (the first of equal maxima wins, as numpy's argmax), ll_i = log p(continuation_i | context_i).
//   LAMBADA: acc = [the last word is what greedy decoding gives] (lm-eval's is_greedy), and
//   perplexity = exp(−mean_items ll) (lm-eval's `perplexity` aggregation over items), its standard
//   error by the delta method: perplexity · stderr(mean ll).
// Every metric's standard error is mean_with_stderr's (task_result.h).
#pragma once
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "eval/choice_item.h"
#include "eval/task_result.h"
#include "inference/language_model.h"

namespace linea::eval {

TaskResult score_multiple_choice(const std::string& task, const std::vector<ChoiceItem>& items,
                                 inference::LanguageModel& model, const data::Tokenizer& tokenizer);

TaskResult score_last_word(const std::string& task, const std::vector<LastWordItem>& items,
                           inference::LanguageModel& model, const data::Tokenizer& tokenizer);

}  // namespace linea::eval
