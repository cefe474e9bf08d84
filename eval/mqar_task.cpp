#include "eval/mqar_task.h"

#include <algorithm>

#include "eval/scoring_requests.h"

namespace linea::eval {

TaskResult score_mqar(const MqarTaskSettings& s, const std::vector<VocabularyWord>& words,
                      inference::LanguageModel& model) {
  data::MqarConfig config;
  config.vocab = std::min<int64_t>(int64_t(words.size()), 8192);
  config.seq_len = s.seq_len;
  config.pairs = s.pairs;
  require_words(words, size_t(std::max<int64_t>(2 * s.pairs + 2, 64)), "mqar");
  data::check_mqar_config(config, "mqar");
  std::vector<inference::ScoreRequest> requests;
  for (int64_t i = 0; i < s.samples; ++i) {
    const data::MqarSequence seq = data::mqar_sequence(config, s.seed, uint64_t(i));
    inference::TokenIds ids;
    for (int32_t id : seq.inputs) ids.push_back(words[size_t(id)].id);
    for (int64_t t : seq.query_positions) {
      requests.push_back(
          {inference::TokenIds(ids.begin(), ids.begin() + t + 1), {words[size_t(seq.targets[size_t(t)])].id}});
    }
  }
  std::vector<double> right, nll;
  for (const inference::ScoreResult& r : score_in_batches(model, requests)) {
    right.push_back(r.greedy ? 1.0 : 0.0);
    nll.push_back(-r.log_likelihood);
  }
  TaskResult result{"mqar", s.seq_len, s.samples, {}};
  result.metrics["acc"] = mean_with_stderr(right);
  result.metrics["answer_nll"] = mean_with_stderr(nll);
  return result;
}

}  // namespace linea::eval
