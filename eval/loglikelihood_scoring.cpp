#include "eval/loglikelihood_scoring.h"

#include <cmath>

#include "eval/scoring_requests.h"

namespace linea::eval {
namespace {

size_t first_argmax(const std::vector<double>& values) {
  size_t best = 0;
  for (size_t i = 1; i < values.size(); ++i) {
    if (values[i] > values[best]) best = i;
  }
  return best;
}

}  // namespace

TaskResult score_multiple_choice(const std::string& task, const std::vector<ChoiceItem>& items,
                                 inference::LanguageModel& model, const data::Tokenizer& tokenizer) {
  std::vector<inference::ScoreRequest> requests;
  for (const ChoiceItem& item : items) {
    for (size_t i = 0; i < item.continuations.size(); ++i) {
      requests.push_back(make_score_request(tokenizer, item.contexts[i], item.continuations[i]));
    }
  }
  const std::vector<inference::ScoreResult> scores = score_in_batches(model, requests);
  std::vector<double> acc, acc_norm;
  size_t next = 0;
  for (const ChoiceItem& item : items) {
    std::vector<double> ll, normalized;
    for (size_t i = 0; i < item.continuations.size(); ++i, ++next) {
      ll.push_back(scores[next].log_likelihood);
      normalized.push_back(scores[next].log_likelihood / item.norm_bytes[i]);
    }
    acc.push_back(first_argmax(ll) == size_t(item.gold) ? 1.0 : 0.0);
    acc_norm.push_back(first_argmax(normalized) == size_t(item.gold) ? 1.0 : 0.0);
  }
  TaskResult result{task, 0, int64_t(items.size()), {}};
  result.metrics["acc"] = mean_with_stderr(acc);
  result.metrics["acc_norm"] = mean_with_stderr(acc_norm);
  return result;
}

TaskResult score_last_word(const std::string& task, const std::vector<LastWordItem>& items,
                           inference::LanguageModel& model, const data::Tokenizer& tokenizer) {
  std::vector<inference::ScoreRequest> requests;
  for (const LastWordItem& item : items) requests.push_back(make_score_request(tokenizer, item.context, item.target));
  const std::vector<inference::ScoreResult> scores = score_in_batches(model, requests);
  std::vector<double> acc, ll;
  for (const inference::ScoreResult& s : scores) {
    acc.push_back(s.greedy ? 1.0 : 0.0);
    ll.push_back(s.log_likelihood);
  }
  TaskResult result{task, 0, int64_t(items.size()), {}};
  result.metrics["acc"] = mean_with_stderr(acc);
  const MetricValue mean_ll = mean_with_stderr(ll);
  const double perplexity = std::exp(-mean_ll.value);
  result.metrics["perplexity"] = {perplexity, perplexity * mean_ll.stderr_};
  return result;
}

}  // namespace linea::eval
