// Runs synthetic recall samples through LanguageModel::generate (greedy, at most the sample's
// max_tokens, stopping at a newline) and scores the decoded predictions as RULER does
// (recall_sample.h): metric "score", the mean over samples × 100, with its standard error.
#pragma once
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "eval/recall_sample.h"
#include "eval/task_result.h"
#include "inference/language_model.h"

namespace linea::eval {

// The prompts as generate requests: the document token, then the prompt's tokens.
std::vector<inference::GenerateRequest> generate_requests(const std::vector<RecallSample>& samples,
                                                          const data::Tokenizer& tokenizer);

TaskResult score_recall(const std::string& task, int64_t context_length, const std::vector<RecallSample>& samples,
                        inference::LanguageModel& model, const data::Tokenizer& tokenizer, size_t batch_size = 8);

}  // namespace linea::eval
