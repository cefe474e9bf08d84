// The `mqar` evaluation task: Zoology's multi-query associative recall (data/mqar.h) over the
// model's own vocabulary, scored per query through LanguageModel::score: for each query key at
// position t, the context is the sequence up to and including t and the continuation the value;
// a query is right when the value is the greedy choice. Metric "acc": the share of right queries
// over all samples' queries, with the standard error over queries; "answer_nll": −log p(value),
// in nats, likewise over queries (as the RULER tasks' answer_nll, recall_scoring.h).
// The sequence's ids are mapped onto the tokenizer's vocabulary words (vocabulary_words.h): MQAR
// id j ↦ the j-th word's id, so vocab = the number of words (at most 8192), seq_len and pairs as
// the settings give them.
#pragma once
#include <cstdint>
#include <vector>

#include "data/mqar.h"
#include "eval/task_result.h"
#include "eval/vocabulary_words.h"
#include "inference/language_model.h"

namespace linea::eval {

struct MqarTaskSettings {
  int64_t seq_len = 256;
  int64_t pairs = 16;
  int64_t samples = 100;
  uint64_t seed = 42;
};

TaskResult score_mqar(const MqarTaskSettings& settings, const std::vector<VocabularyWord>& words,
                      inference::LanguageModel& model);

}  // namespace linea::eval
