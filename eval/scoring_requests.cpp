#include "eval/scoring_requests.h"

#include <stdexcept>

namespace linea::eval {

inference::ScoreRequest make_score_request(const data::Tokenizer& tokenizer, const std::string& context,
                                           const std::string& continuation) {
  const size_t kept = context.find_last_not_of(' ') + 1;  // npos + 1 = 0: all spaces
  const std::string head = context.substr(0, kept);
  const std::string tail = context.substr(kept) + continuation;
  const std::vector<int32_t> whole = tokenizer.encode(head + tail);
  const std::vector<int32_t> context_ids = tokenizer.encode(head);
  inference::ScoreRequest request;
  request.context.push_back(tokenizer.eos_id());
  // lm-eval's rule: the context's own tokens, and the whole's tokens after as many as it has.
  request.context.insert(request.context.end(), context_ids.begin(), context_ids.end());
  const size_t split = std::min(context_ids.size(), whole.size());
  request.continuation.assign(whole.begin() + split, whole.end());
  if (request.continuation.empty() && !tail.empty()) {
    throw std::runtime_error("the continuation \"" + tail + "\" has no tokens of its own after the context \"" + head +
                             "\"");
  }
  return request;
}

std::vector<inference::ScoreResult> score_in_batches(inference::LanguageModel& model,
                                                     const std::vector<inference::ScoreRequest>& requests,
                                                     size_t batch_size) {
  std::vector<inference::ScoreResult> results;
  results.reserve(requests.size());
  for (size_t first = 0; first < requests.size(); first += batch_size) {
    const std::vector<inference::ScoreRequest> batch(requests.begin() + first,
                                                     requests.begin() + std::min(requests.size(), first + batch_size));
    std::vector<inference::ScoreResult> answers = model.score(batch);
    if (answers.size() != batch.size()) {
      throw std::runtime_error("the model answered " + std::to_string(answers.size()) + " of " +
                               std::to_string(batch.size()) + " score requests");
    }
    results.insert(results.end(), answers.begin(), answers.end());
  }
  return results;
}

}  // namespace linea::eval
