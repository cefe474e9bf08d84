#include "eval/recall_scoring.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace linea::eval {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

double string_match(const std::string& prediction, const std::vector<std::string>& references, StringMatch match) {
  if (references.empty()) throw std::invalid_argument("string_match: a sample without references");
  const std::string text = lower(prediction);
  size_t found = 0;
  for (const std::string& r : references) found += text.find(lower(r)) != std::string::npos;
  if (match == StringMatch::part) return found > 0 ? 1.0 : 0.0;
  return double(found) / double(references.size());
}

std::vector<inference::GenerateRequest> generate_requests(const std::vector<RecallSample>& samples,
                                                          const data::Tokenizer& tokenizer) {
  const std::vector<int32_t> newline = tokenizer.encode("\n");
  std::vector<inference::GenerateRequest> requests;
  for (const RecallSample& s : samples) {
    inference::GenerateRequest r;
    r.prompt.push_back(tokenizer.eos_id());
    const std::vector<int32_t> ids = tokenizer.encode(s.prompt);
    r.prompt.insert(r.prompt.end(), ids.begin(), ids.end());
    r.max_tokens = s.max_tokens;
    r.stop = {newline};
    requests.push_back(std::move(r));
  }
  return requests;
}

TaskResult score_recall(const std::string& task, int64_t context_length, const std::vector<RecallSample>& samples,
                        inference::LanguageModel& model, const data::Tokenizer& tokenizer, size_t batch_size) {
  const std::vector<inference::GenerateRequest> requests = generate_requests(samples, tokenizer);
  std::vector<double> scores;
  for (size_t first = 0; first < requests.size(); first += batch_size) {
    const size_t end = std::min(requests.size(), first + batch_size);
    const std::vector<inference::GenerateRequest> batch(requests.begin() + first, requests.begin() + end);
    const std::vector<inference::TokenIds> outputs = model.generate(batch);
    if (outputs.size() != batch.size()) {
      throw std::runtime_error(task + ": the model answered " + std::to_string(outputs.size()) + " of " +
                               std::to_string(batch.size()) + " generate requests");
    }
    for (size_t i = first; i < end; ++i) {
      const std::string prediction = tokenizer.decode(outputs[i - first]);
      scores.push_back(100.0 * string_match(prediction, samples[i].references, samples[i].match));
    }
  }
  TaskResult result{task, context_length, int64_t(samples.size()), {}};
  result.metrics["score"] = mean_with_stderr(scores);
  return result;
}

}  // namespace linea::eval
