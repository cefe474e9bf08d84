// RecallSample: one generated prompt of a synthetic recall task and what a right answer holds, and
// the scoring RULER applies to the model's greedy continuation (RULER's eval/synthetic/constants.py):
//   all:  string_match_all, the share of the references found in the prediction (case-insensitive);
//   part: string_match_part, 1 when any reference is found in it, else 0.
// A task's score is the mean over samples × 100 (RULER reports percentages).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace linea::eval {

enum class StringMatch { all, part };

struct RecallSample {
  std::string prompt;  // the instruction, the context, the question and the answer prefix
  std::vector<std::string> references;
  int64_t max_tokens = 0;  // RULER's tokens_to_generate for the task
  StringMatch match = StringMatch::all;
};

// The score of one prediction in [0, 1].
double string_match(const std::string& prediction, const std::vector<std::string>& references, StringMatch match);

}  // namespace linea::eval
