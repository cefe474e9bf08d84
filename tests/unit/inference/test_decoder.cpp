// Decoding against the full forward, for every mixer of the registry, pure and in a hybrid with
// softmax attention (a sliding window too), on several documents at once: the logits of a
// prefill (Model::logits_continuing from empty states) and then of one token per sequence per
// step equal the logits of one full forward over the whole documents (Model::logits), to 1e-5
// relative in f32. Model::logits itself agrees with evaluate()'s cross-entropy. The same check on
// CUDA models: tests/gpu/inference/test_gpu_decoder.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "inference/decoder.h"
#include "model/decoding_memory.h"
#include "model/mixer_registry.h"
#include "model/mixers/gla/gla_configs.h"
#include "model/model.h"
#include "model/routing.h"
#include "tests/testing/model_inputs.h"

namespace linea {
namespace {

// conv: the kernel of GLA's and RetNet's optional short convs (0: none, their default).
ModelConfig config_for(const std::string& mixer, bool hybrid, int64_t window, int64_t conv = 0) {
  ModelConfig c = testing::tiny_hybrid_config(mixer, false, testing::kInferenceSizes);
  if (mixer == "gla") c.mixer_config<GlaConfig>(mixer).conv = conv;
  if (mixer == "retnet") c.mixer_config<RetNetConfig>(mixer).conv = conv;
  if (!hybrid && mixer != "attention") {
    c.hybrid = "pure";
    c.attention_layers.clear();
  }
  c.mixer_config<AttentionConfig>("attention").window = window;
  return c;
}

// max |a − b| / max |b| over all entries.
double relative_error(const Tensor& a, const Tensor& b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    diff = std::max(diff, std::abs(double(a.data<float>()[i]) - double(b.data<float>()[i])));
    scale = std::max(scale, std::abs(double(b.data<float>()[i])));
  }
  return diff / scale;
}

Tensor row_of(const Tensor& logits, int64_t row) { return logits.slice(row, row + 1).clone(); }

// Three documents of 5 + 9, 1 + 9 and 13 + 9 tokens: prompts of 5, 1 and 13 tokens (longer than
// the conv and the window, shorter and longer than each other), then 9 steps of one token each.
void check_decoding_matches_full_forward(const std::string& mixer, bool hybrid, int64_t window = 0, int64_t conv = 0) {
  SCOPED_TRACE(mixer + (hybrid ? " hybrid" : " pure") + " window " + std::to_string(window) + " conv " +
               std::to_string(conv));
  Model model(config_for(mixer, hybrid, window, conv));
  model.init_parameters(7);
  const std::vector<int64_t> prompt_lengths = {5, 1, 13};
  const int64_t steps = 9;
  std::vector<int64_t> lengths;
  for (int64_t p : prompt_lengths) lengths.push_back(p + steps);
  const testing::PackedBatch batch = testing::packed_batch(lengths, model.config().vocab, 11);
  const int32_t* ids = batch.ids.data<int32_t>();
  std::vector<int64_t> all_rows(static_cast<size_t>(batch.seqs.num_tokens()));
  for (size_t i = 0; i < all_rows.size(); ++i) all_rows[i] = static_cast<int64_t>(i);
  const Tensor full = model.logits(batch.ids, batch.seqs, all_rows);

  inference::Decoder decoder(model, 3);
  std::vector<inference::TokenIds> prompts;
  for (int64_t s = 0; s < 3; ++s) {
    const int32_t* begin = ids + batch.seqs.begin(s);
    prompts.emplace_back(begin, begin + prompt_lengths[s]);
  }
  Tensor logits = decoder.prefill(prompts);
  for (int64_t step = 0; step <= steps; ++step) {
    inference::TokenIds next;
    for (int64_t s = 0; s < 3; ++s) {
      const int64_t position = batch.seqs.begin(s) + prompt_lengths[s] - 1 + step;
      EXPECT_LE(relative_error(row_of(logits, s), row_of(full, position)), 1e-5)
          << "sequence " << s << " step " << step;
      if (step < steps) next.push_back(ids[position + 1]);
    }
    if (step < steps) logits = decoder.step(next);
  }
  EXPECT_GT(decoder.state_bytes(), 0u);
}

TEST(Decoder, EveryMixerPureMatchesFullForward) {
  for (const std::string& mixer : mixer_names()) check_decoding_matches_full_forward(mixer, false);
}

TEST(Decoder, EveryMixerInAHybridMatchesFullForward) {
  for (const std::string& mixer : mixer_names()) {
    if (mixer != "attention") check_decoding_matches_full_forward(mixer, true);
  }
}

// GLA and RetNet with their optional q, k, v short convs (off by default): the convs' input
// histories carry across the calls.
TEST(Decoder, GlaAndRetNetWithShortConvsMatchFullForward) {
  for (const std::string mixer : {"gla", "retnet"}) check_decoding_matches_full_forward(mixer, false, 0, 4);
}

TEST(Decoder, SlidingWindowAttentionMatchesFullForward) {
  check_decoding_matches_full_forward("attention", false, 4);
  check_decoding_matches_full_forward("gdn", true, 3);
}

// Model::logits_continuing over calls of several tokens per sequence (the decoder's steps take one;
// a prefill from empty states skips the input histories' copies, a later call of several tokens
// does not): three documents of 5 + 4 + 1, 1 + 2 + 6 and 13 + 1 + 3 tokens, every row of every call
// against the full forward.
void check_chunks_match_full_forward(const std::string& mixer, int64_t window, int64_t conv = 0) {
  SCOPED_TRACE(mixer + " window " + std::to_string(window) + " conv " + std::to_string(conv));
  Model model(config_for(mixer, true, window, conv));
  model.init_parameters(7);
  const std::vector<std::vector<int64_t>> calls = {{5, 1, 13}, {4, 2, 1}, {1, 6, 3}};  // tokens per sequence
  std::vector<int64_t> lengths(3, 0);
  for (const auto& call : calls) {
    for (size_t s = 0; s < 3; ++s) lengths[s] += call[s];
  }
  const testing::PackedBatch batch = testing::packed_batch(lengths, model.config().vocab, 11);
  std::vector<int64_t> all_rows(static_cast<size_t>(batch.seqs.num_tokens()));
  for (size_t i = 0; i < all_rows.size(); ++i) all_rows[i] = static_cast<int64_t>(i);
  const Tensor full = model.logits(batch.ids, batch.seqs, all_rows);

  Model::DecodingState state = model.start_decoding(3);
  std::vector<int64_t> seen(3, 0);
  for (size_t c = 0; c < calls.size(); ++c) {
    SeqLayout seqs;
    std::vector<int32_t> ids;
    std::vector<int64_t> full_rows;
    for (size_t s = 0; s < 3; ++s) {
      for (int64_t i = 0; i < calls[c][s]; ++i) {
        const int64_t row = batch.seqs.begin(static_cast<int64_t>(s)) + seen[s] + i;
        ids.push_back(batch.ids.data<int32_t>()[row]);
        full_rows.push_back(row);
      }
      seen[s] += calls[c][s];
      seqs.cu_seqlens.push_back(static_cast<int64_t>(ids.size()));
    }
    std::vector<int64_t> rows(ids.size());
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
    const Tensor logits = model.logits_continuing(testing::index_tensor(ids), seqs, state, rows);
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_LE(relative_error(row_of(logits, static_cast<int64_t>(i)), row_of(full, full_rows[i])), 1e-5)
          << "call " << c << " row " << i;
    }
  }
}

TEST(Decoder, EveryMixerMatchesFullForwardOverCallsOfSeveralTokens) {
  for (const std::string& mixer : mixer_names()) check_chunks_match_full_forward(mixer, 0);
  check_chunks_match_full_forward("gdn", 3);
  check_chunks_match_full_forward("gla", 0, 4);
  check_chunks_match_full_forward("retnet", 0, 4);
}

TEST(Decoder, LinearStatesStayFixedWhileTheKvCacheGrows) {
  Model linear(config_for("gdn", false, 0)), attention(config_for("attention", false, 0)),
      window(config_for("attention", false, 4));
  for (Model* m : {&linear, &attention, &window}) m->init_parameters(1);
  inference::Decoder d_linear(linear, 1), d_attention(attention, 1), d_window(window, 1);
  d_linear.prefill({{1, 2, 3}});
  d_attention.prefill({{1, 2, 3}});
  d_window.prefill({{1, 2, 3}});
  const size_t linear_bytes = d_linear.state_bytes(), attention_bytes = d_attention.state_bytes();
  for (int i = 0; i < 6; ++i) {
    d_linear.step({4});
    d_attention.step({4});
    d_window.step({4});
  }
  EXPECT_EQ(d_linear.state_bytes(), linear_bytes);
  // 3 layers × (K and V) × Hkv·Dh = 8 values × 4 bytes per token seen: 3 + 6 tokens.
  EXPECT_EQ(attention_bytes, 3u * 2 * 8 * 4 * 3);
  EXPECT_EQ(d_attention.state_bytes(), 3u * 2 * 8 * 4 * 9);
  EXPECT_EQ(d_window.state_bytes(), 3u * 2 * 8 * 4 * 3);  // window − 1 = 3 tokens kept
}

// `linea params --inference`'s model of the states (model/decoding_memory.h) against the bytes
// the decoder's states hold, in an f32 run, for every mixer in a hybrid with a window, GLA and
// RetNet with their short convs (the bf16 run's bytes: tests/gpu/inference/test_gpu_decoder.cpp).
TEST(DecodingMemory, PredictsTheBytesOfTheDecoderStates) {
  for (const std::string& mixer : mixer_names()) {
    SCOPED_TRACE(mixer);
    const ModelConfig config = config_for(mixer, true, 3, mixer == "gla" || mixer == "retnet" ? 4 : 0);
    Model model(config);
    model.init_parameters(2);
    inference::Decoder decoder(model, 2);
    decoder.prefill({{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}});
    for (int i = 0; i < 3; ++i) decoder.step({1, 2});
    EXPECT_EQ(double(decoder.state_bytes()), 2 * decoding_memory(config).bytes_after(8, DType::f32));
  }
}

// Σ over the rows with a target of (logsumexp − logit of the target) / count, from Model::logits:
// evaluate()'s mean cross-entropy.
double mean_cross_entropy_of_logits(Model& model, const testing::PackedBatch& batch) {
  std::vector<int64_t> rows;
  for (int64_t t = 0; t < batch.seqs.num_tokens(); ++t) {
    if (batch.targets.data<int32_t>()[t] >= 0) rows.push_back(t);
  }
  const int64_t vocab = model.config().vocab;
  const Tensor logits = model.logits(batch.ids, batch.seqs, rows);
  EXPECT_EQ(logits.shape(), (Shape{static_cast<int64_t>(rows.size()), vocab}));
  double sum = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    const float* z = logits.data<float>() + r * vocab;
    double m = -INFINITY, total = 0;
    for (int64_t v = 0; v < vocab; ++v) m = std::max(m, double(z[v]));
    for (int64_t v = 0; v < vocab; ++v) total += std::exp(double(z[v]) - m);
    sum += m + std::log(total) - z[batch.targets.data<int32_t>()[rows[r]]];
  }
  return sum / double(rows.size());
}

TEST(ModelLogits, AgreeWithTheCrossEntropyOfEvaluate) {
  Model model(config_for("kda", true, 0));
  model.init_parameters(5);
  const testing::PackedBatch batch = testing::packed_batch({6, 9}, model.config().vocab, 3);
  EXPECT_NEAR(mean_cross_entropy_of_logits(model, batch), model.evaluate(batch.ids, batch.targets, batch.seqs), 1e-5);
}

// Model::logits releases each block's tensors once its output is kept, except where CLER carries a
// layer's write error r to a later layer: the logits of a CLER model (its λ drawn away from 0, so r
// matters) still give evaluate()'s cross-entropy.
TEST(ModelLogits, KeepTheWriteErrorThatCLERCarriesAcrossBlocks) {
  ModelConfig config = config_for("kda", true, 0);
  config.layers = 4;
  config.routing.kind = RoutingKind::cler;
  Model model(config);
  model.init_parameters(5);
  Rng rng(6);
  for (Parameter& p : model.params().params()) {
    if (is_routing_parameter(p.name)) fill_normal(p.value, rng, 0, 0.5);
  }
  const testing::PackedBatch batch = testing::packed_batch({6, 9}, model.config().vocab, 3);
  EXPECT_NEAR(mean_cross_entropy_of_logits(model, batch), model.evaluate(batch.ids, batch.targets, batch.seqs), 1e-5);
}

TEST(ModelLogits, RejectRowsOutsideTheTokens) {
  Model model(config_for("gdn", false, 0));
  model.init_parameters(5);
  const testing::PackedBatch batch = testing::packed_batch({4}, model.config().vocab, 3);
  EXPECT_TRUE(
      testing::throws_invalid_argument([&] { model.logits(batch.ids, batch.seqs, {4}); }, {"outside the 4 tokens"}));
}

}  // namespace
}  // namespace linea
