// Runs synthetic recall samples through LanguageModel::generate (greedy, at most the sample's
// max_tokens, stopping at a newline) and scores the decoded predictions as RULER does
// (recall_sample.h): metric "score", the mean over samples × 100, with its standard error.
// Beside it, two teacher-forced metrics through LanguageModel::score (lm-eval's log-likelihood
// measures), continuous where a weak model's "score" is 0 everywhere:
//   answer_nll:    −log p(answer | prompt) / (the answer's tokens), in nats per answer token;
//   answer_greedy: 100 × [every answer token is the argmax at its position] (ScoreResult::greedy,
//                  so ties count as a generate would break them);
// each the mean over samples with its standard error (task_result.h). The context is the generate
// request's prompt; the continuation is answer_text(sample) tokenized on its own, so it is the
// token sequence a greedy generation from that prompt would have to produce.
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

// The reference answer as the prompt's answer prefix asks for it: StringMatch::part (one right
// answer suffices) its first reference; StringMatch::all every reference in order, joined by ", "
// ("1234567, 7654321"). A space separates it from the prefix ("... are" + " 1234567",
// "Answer:" + " The moon") unless the prompt ends in whitespace already (vt's "they are: ").
std::string answer_text(const RecallSample& sample);

TaskResult score_recall(const std::string& task, int64_t context_length, const std::vector<RecallSample>& samples,
                        inference::LanguageModel& model, const data::Tokenizer& tokenizer, size_t batch_size = 8);

}  // namespace linea::eval
