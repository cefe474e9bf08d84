// ModelLanguageModel (inference::LanguageModel over a Model): score equals the log-softmax of one
// full forward of each request alone, whatever the batching; an empty continuation scores 0 and
// is greedy; an empty context skips the first continuation token; greedy generation equals the
// argmax of repeated full forwards; stop sequences end a generation (included); sampling is
// reproducible from its seed and independent of the batch; top_k = 1 is greedy; bad requests are
// refused naming the request.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "inference/model_language_model.h"
#include "inference/sampler.h"
#include "model/model.h"
#include "tests/testing/model_inputs.h"

namespace linea {
namespace {

using inference::GenerateRequest;
using inference::ModelLanguageModel;
using inference::ScoreRequest;
using inference::TokenIds;

ModelConfig tiny(const std::string& mixer) {
  testing::TinyHybridSizes sizes = testing::kInferenceSizes;
  sizes.vocab = 19;
  sizes.init_std = 0.5;
  return testing::tiny_hybrid_config(mixer, true, sizes);
}

// The logits after `tokens` (one full forward), the last row.
Tensor last_logits(Model& model, const TokenIds& tokens) {
  const Tensor ids = testing::index_tensor(tokens);
  return model.logits(ids, SeqLayout::uniform(1, static_cast<int64_t>(tokens.size())),
                      {static_cast<int64_t>(tokens.size()) - 1});
}

// Σ log p(continuation | context), one position at a time through full forwards.
double reference_score(Model& model, const ScoreRequest& r) {
  TokenIds text = r.context;
  double total = 0;
  for (int32_t token : r.continuation) {
    if (!text.empty()) total += inference::token_log_probability(last_logits(model, text), 0, token);
    text.push_back(token);
  }
  return total;
}

TokenIds reference_greedy(Model& model, TokenIds text, int64_t count) {
  TokenIds out;
  for (int64_t i = 0; i < count; ++i) {
    out.push_back(inference::argmax_token(last_logits(model, text), 0));
    text.push_back(out.back());
  }
  return out;
}

struct LanguageModelTest : ::testing::Test {
  LanguageModelTest() : model(tiny("gdn")) { model.init_parameters(9); }
  Model model;
};

TEST_F(LanguageModelTest, ScoreIsTheLogLikelihoodOfEachRequestAloneWhateverTheBatching) {
  const std::vector<ScoreRequest> requests = {
      {{1, 2, 3}, {4, 5}}, {{7}, {8, 9, 10, 11}}, {{}, {3, 4, 5}}, {{2, 2}, {}}, {{5, 6, 7, 8, 9}, {1}}};
  std::vector<double> expected;
  for (const ScoreRequest& r : requests) expected.push_back(reference_score(model, r));
  for (int64_t batch_tokens : {1, 7, 1000}) {
    ModelLanguageModel lm(model, {.max_batch_tokens = batch_tokens, .max_batch_sequences = 4});
    const auto results = lm.score(requests);
    ASSERT_EQ(results.size(), requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_NEAR(results[i].log_likelihood, expected[i], 1e-5) << "request " << i << " batch " << batch_tokens;
    }
    EXPECT_EQ(results[3].log_likelihood, 0.0);  // an empty continuation
    EXPECT_TRUE(results[3].greedy);
  }
}

TEST_F(LanguageModelTest, GreedyGenerationEqualsRepeatedFullForwardsAndScoresAsGreedy) {
  ModelLanguageModel lm(model);
  const std::vector<GenerateRequest> requests = {{{1, 2, 3}, 6, {}}, {{4}, 3, {}}, {{5, 6, 7, 8, 9, 10}, 0, {}}};
  const auto out = lm.generate(requests);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], reference_greedy(model, {1, 2, 3}, 6));
  EXPECT_EQ(out[1], reference_greedy(model, {4}, 3));
  EXPECT_TRUE(out[2].empty());
  const auto scored = lm.score({{{1, 2, 3}, out[0]}});
  EXPECT_TRUE(scored[0].greedy);
  TokenIds changed = out[0];
  changed[2] = (changed[2] + 1) % 19;
  EXPECT_FALSE(lm.score({{{1, 2, 3}, changed}})[0].greedy);
  EXPECT_GT(lm.stats().decode_tokens, 0);
  EXPECT_EQ(lm.stats().prefill_tokens, 10);
}

TEST_F(LanguageModelTest, StopSequencesEndTheGenerationAndAreIncluded) {
  ModelLanguageModel lm(model);
  const TokenIds full = lm.generate({{{3, 1, 4}, 8, {}}})[0];
  const TokenIds stop(full.begin() + 3, full.begin() + 5);
  // The first place where the stop sequence ends.
  size_t end = 1;
  while (!std::equal(stop.begin(), stop.end(), full.begin() + static_cast<std::ptrdiff_t>(end) - 1)) ++end;
  const TokenIds stopped = lm.generate({{{3, 1, 4}, 8, {TokenIds(9, 0), stop}}})[0];
  EXPECT_EQ(stopped, TokenIds(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(end) + 1));
}

TEST_F(LanguageModelTest, SamplingIsReproducibleAndIndependentOfTheBatch) {
  const std::vector<GenerateRequest> requests = {{{1, 2}, 5, {}}, {{3}, 5, {}}, {{4, 5, 6}, 5, {}}};
  inference::SamplingOptions sampling{.temperature = 1.5, .top_k = 8, .top_p = 0.9, .seed = 17};
  ModelLanguageModel together(model, {.max_batch_tokens = 1000, .max_batch_sequences = 3});
  ModelLanguageModel alone(model, {.max_batch_tokens = 1000, .max_batch_sequences = 1});
  const auto a = together.generate(requests, sampling);
  EXPECT_EQ(a, alone.generate(requests, sampling));
  EXPECT_EQ(a, together.generate(requests, sampling));
  sampling.seed = 18;
  EXPECT_NE(a, together.generate(requests, sampling));
  sampling.top_k = 1;  // only the most likely token is left
  EXPECT_EQ(together.generate(requests, sampling), together.generate(requests));
}

TEST_F(LanguageModelTest, BadRequestsAreRefusedNamingTheRequest) {
  ModelLanguageModel lm(model);
  EXPECT_TRUE(testing::throws_invalid_argument(
      [&] {
        lm.score({{{1}, {2}}, {{1, 19}, {2}}});
      },
      {"request 1", "context token 19", "[0, 19)"}));
  EXPECT_TRUE(testing::throws_invalid_argument([&] { lm.generate({{{}, 3, {}}}); }, {"request 0", "empty prompt"}));
  EXPECT_TRUE(testing::throws_invalid_argument(
      [&] {
        lm.generate({{{1}, 3, {}}}, inference::SamplingOptions{.top_p = 0});
      },
      {"top_p"}));
}

}  // namespace
}  // namespace linea
