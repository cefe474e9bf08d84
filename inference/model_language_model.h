// ModelLanguageModel: inference::LanguageModel over a linea Model.
//   score:    the requests are packed as separate documents into batches of at most
//             max_batch_tokens tokens (a longer request goes alone); one full forward per batch,
//             the logits of the positions that predict each continuation token (with an empty
//             context the first continuation token has no such position and is not scored).
//   generate: batches of at most max_batch_sequences prompts through a Decoder (prefill, then
//             one token per step), with the sampling of `sampling` (greedy for the interface's
//             generate). Every request gets the answer it would get alone: documents never see
//             each other and request i samples from its own generator seeded with (seed, i).
// Timings of the latest generate are in stats(). On the model's device (CPU or CUDA: the logits
// come back to the host in f32, from the compute dtype's head).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "inference/language_model.h"
#include "inference/sampler.h"
#include "model/model.h"

namespace linea::inference {

struct GenerateStats {
  int64_t prefill_tokens = 0, decode_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  size_t peak_state_bytes = 0;  // of the largest batch's decoding states
};

class ModelLanguageModel final : public LanguageModel {
 public:
  struct Options {
    int64_t max_batch_tokens = 16384;
    int64_t max_batch_sequences = 32;
  };
  ModelLanguageModel(Model& model, Options options);
  explicit ModelLanguageModel(Model& model) : ModelLanguageModel(model, Options{}) {}

  std::vector<ScoreResult> score(const std::vector<ScoreRequest>& requests) override;
  std::vector<TokenIds> generate(const std::vector<GenerateRequest>& requests) override;
  // stop_test(request, generated), when given, is asked after every token whether request's
  // generation ends there (besides max_tokens and the stop sequences): the CLI's stop strings.
  using StopTest = std::function<bool(size_t request, const TokenIds& generated)>;
  std::vector<TokenIds> generate(const std::vector<GenerateRequest>& requests, const SamplingOptions& sampling,
                                 const StopTest& stop_test = {});
  int64_t vocab_size() const override { return model_.config().vocab; }

  const GenerateStats& stats() const { return stats_; }

 private:
  void check_ids(const TokenIds& ids, const char* what, size_t request) const;
  // One decoder batch: requests [first, end).
  void generate_batch(const std::vector<GenerateRequest>& requests, size_t first, size_t end,
                      const SamplingOptions& sampling, const StopTest& stop_test, std::vector<TokenIds>& out);

  Model& model_;
  Options options_;
  GenerateStats stats_;
};

}  // namespace linea::inference
