#include "eval/recall_scoring.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "eval/scoring_requests.h"

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

std::string answer_text(const RecallSample& sample) {
  if (sample.references.empty()) throw std::invalid_argument("answer_text: a sample without references");
  const bool spaced = !sample.prompt.empty() && std::isspace(static_cast<unsigned char>(sample.prompt.back()));
  std::string text = spaced ? "" : " ";
  if (sample.match == StringMatch::part) return text + sample.references.front();
  for (size_t i = 0; i < sample.references.size(); ++i) text += (i ? ", " : "") + sample.references[i];
  return text;
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
  std::vector<inference::ScoreRequest> answers;
  for (size_t i = 0; i < samples.size(); ++i) {
    const std::string text = answer_text(samples[i]);
    answers.push_back({requests[i].prompt, tokenizer.encode(text)});
    if (answers.back().continuation.empty())
      throw std::runtime_error(task + ": the answer \"" + text + "\" has no tokens");
  }
  const std::vector<inference::ScoreResult> likelihoods = score_in_batches(model, answers, batch_size);
  std::vector<double> nll, greedy;
  for (size_t i = 0; i < answers.size(); ++i) {
    nll.push_back(-likelihoods[i].log_likelihood / double(answers[i].continuation.size()));
    greedy.push_back(likelihoods[i].greedy ? 100.0 : 0.0);
  }
  TaskResult result{task, context_length, int64_t(samples.size()), {}};
  result.metrics["score"] = mean_with_stderr(scores);
  result.metrics["answer_nll"] = mean_with_stderr(nll);
  result.metrics["answer_greedy"] = mean_with_stderr(greedy);
  return result;
}

}  // namespace linea::eval
