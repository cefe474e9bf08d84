// The evaluation table of a sweep's summary.md: per run, the newest value of each evaluation
// metric in RUN_DIR/eval.jsonl (`linea eval`, [eval] during training), one column per
// "task[@context length] metric" among acc, acc_norm, score, answer_nll, answer_greedy, perplexity,
// and the last val_acc of RUN_DIR/metrics.jsonl (MQAR runs). Empty when no run has any of them. A
// line that is not a JSON object with a "task" is an error naming the file and line.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace linea::coordinator {

// runs: (name, run directory) pairs, in table order.
std::string format_eval_markdown(const std::vector<std::pair<std::string, std::string>>& runs);

}  // namespace linea::coordinator
