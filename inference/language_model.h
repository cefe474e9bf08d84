// LanguageModel: a trained model as evaluations see it. Two primitives, the ones lm-eval-harness
// and RULER build every task from:
//   score:    log p(continuation | context), summed over the continuation's tokens, and whether
//             greedy decoding would have produced the continuation (argmax at every position);
//   generate: greedy continuation of a prompt, at most max_tokens, ending early after any of the
//             stop sequences (the stop sequence is included in the result).
// Requests are token ids of the model's own tokenizer; batches are answered in request order.
// Implementations must give every request the answer it would get alone (no cross-talk between
// the sequences of a batch). An empty context is allowed for score (the continuation is then
// scored from the model's first position); an empty continuation scores 0 and is greedy.
#pragma once
#include <cstdint>
#include <vector>

namespace linea::inference {

using TokenIds = std::vector<int32_t>;

struct ScoreRequest {
  TokenIds context;
  TokenIds continuation;
};

struct ScoreResult {
  double log_likelihood = 0;  // Σ log p(continuation[i] | context, continuation[<i]), natural log
  bool greedy = true;         // every continuation token was the argmax at its position
};

struct GenerateRequest {
  TokenIds prompt;
  int64_t max_tokens = 0;
  std::vector<TokenIds> stop;  // token sequences that end the generation
};

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;
  virtual std::vector<ScoreResult> score(const std::vector<ScoreRequest>& requests) = 0;
  virtual std::vector<TokenIds> generate(const std::vector<GenerateRequest>& requests) = 0;
  // The vocabulary size: every id a request holds must be below it.
  virtual int64_t vocab_size() const = 0;
};

}  // namespace linea::inference
