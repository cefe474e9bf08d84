// Decoding on the GPU against the full forward on the GPU (tests/unit/inference/test_decoder.cpp's
// check, on CUDA models): for every mixer of the registry, pure and in a hybrid with softmax
// attention (and with sliding windows), three documents with prompts of 5, 1 and 70 tokens (one
// shorter than the conv, one longer than a chunk of 64) and 9 decoding steps each; the logits of the
// prefill (the chunked ops from empty states) and of every step (the one-token kernels over the
// states: delta rule, GLA family, HGRN, attention over the KV cache, the convs' and token shift's
// input histories) equal those of one full forward over the whole documents (Model::logits).
// Error: max |Δ| / max |logit| over a row. f32 models (f32 weights, activations and states): the
// decoder's rows against the full forward's, ≤ 1e-5. bf16 models (bf16 weights and activations, f32
// states and gates) round different intermediates to bf16 on the two paths (the chunked bf16
// tensor-core pipeline and flash attention on one side, f32 one-token kernels over f32 states on the
// other), so neither is the reference: both are measured against the f32 model of the same weights,
// and the decoder's worst row may be at most 2× the full bf16 forward's worst row (it is as accurate
// as the forward it replaces). RWKV-6 runs f32 steps only (its layer refuses bf16). The worst errors
// per mixer and dtype are printed at the end. Also: 40 sequences at once (several blocks of each
// kernel) and the decoder's state bytes on the device, equal to model/decoding_memory.h's count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "inference/decoder.h"
#include "model/decoding_memory.h"
#include "model/mixer_registry.h"
#include "model/mixers/attention/attention_config.h"
#include "model/model.h"
#include "tests/gpu/gpu_test.h"
#include "tests/testing/model_inputs.h"

namespace linea {
namespace {

struct DecodingErrors {
  double decoder = 0;       // worst row: decoder vs the reference
  double full_forward = 0;  // worst row: the model's full forward vs the reference (bf16 only)
};

struct WorstErrors : ::testing::Environment {
  std::map<std::string, DecodingErrors> worst;  // [mixer layout/dtype]
  void TearDown() override {
    for (const auto& [run, e] : worst) {
      std::cout << "[cuda decoding rel. error] " << run << ": decoder " << e.decoder;
      if (e.full_forward > 0) std::cout << ", full forward " << e.full_forward << " (vs the f32 model)";
      std::cout << "\n";
    }
  }
  void record(const std::string& run, const DecodingErrors& e) {
    DecodingErrors& w = worst[run];
    w.decoder = std::max(w.decoder, e.decoder);
    w.full_forward = std::max(w.full_forward, e.full_forward);
  }
};
WorstErrors* const worst = static_cast<WorstErrors*>(::testing::AddGlobalTestEnvironment(new WorstErrors));

// bf16: the decoder's worst row over the full bf16 forward's worst row, both against the f32 model.
constexpr double kBf16ErrorGrowth = 2.0;
constexpr double kF32Tolerance = 1e-5;

// Head sizes the CUDA kernels take (testing::kGpuSizes, as tests/gpu/test_gpu_model.cpp).
ModelConfig config_for(const std::string& mixer, bool hybrid, int64_t window) {
  ModelConfig c = testing::tiny_hybrid_config(mixer, false, testing::kGpuSizes);
  if (!hybrid && mixer != "attention") {
    c.hybrid = "pure";
    c.attention_layers.clear();
  }
  c.mixer_config<AttentionConfig>("attention").window = window;
  return c;
}

// max |a − b| / max |b| over row `a_row` of a and row `b_row` of b (host f32 logits).
double relative_error(const Tensor& a, int64_t a_row, const Tensor& b, int64_t b_row) {
  const int64_t vocab = a.dim(1);
  const float *x = a.data<float>() + a_row * vocab, *y = b.data<float>() + b_row * vocab;
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    diff = std::max(diff, std::abs(double(x[i]) - double(y[i])));
    scale = std::max(scale, std::abs(double(y[i])));
  }
  return diff / scale;
}

// Prompts of prompt_lengths[s] tokens, then `steps` steps of one token each; every row's logits
// against the reference: the full forward of the same model (f32), of the f32 model of the same
// weights (bf16).
DecodingErrors check_decoding(const ModelConfig& config, DType dtype, const std::vector<int64_t>& prompt_lengths,
                              int64_t steps) {
  Model model(config, DType::f32, true, {}, Device::cuda, dtype);
  model.init_parameters(7);
  const int64_t S = static_cast<int64_t>(prompt_lengths.size());
  std::vector<int64_t> lengths;
  for (int64_t p : prompt_lengths) lengths.push_back(p + steps);
  const testing::PackedBatch batch = testing::packed_batch(lengths, config.vocab, 11);
  const int32_t* ids = batch.ids.data<int32_t>();
  std::vector<int64_t> all_rows(static_cast<size_t>(batch.seqs.num_tokens()));
  for (size_t i = 0; i < all_rows.size(); ++i) all_rows[i] = static_cast<int64_t>(i);
  const Tensor full = model.logits(batch.ids, batch.seqs, all_rows);
  auto position = [&](int64_t s, int64_t step) {
    return batch.seqs.begin(s) + prompt_lengths[static_cast<size_t>(s)] - 1 + step;
  };

  DecodingErrors errors;
  Tensor reference = full;
  if (dtype != DType::f32) {
    Model f32_model(config, DType::f32, true, {}, Device::cuda, DType::f32);
    f32_model.init_parameters(7);
    reference = f32_model.logits(batch.ids, batch.seqs, all_rows);
    for (int64_t s = 0; s < S; ++s)
      for (int64_t step = 0; step <= steps; ++step)
        errors.full_forward =
            std::max(errors.full_forward, relative_error(full, position(s, step), reference, position(s, step)));
  }
  const double tolerance = dtype == DType::f32 ? kF32Tolerance : kBf16ErrorGrowth * errors.full_forward;

  inference::Decoder decoder(model, S);
  std::vector<inference::TokenIds> prompts;
  for (int64_t s = 0; s < S; ++s) {
    const int32_t* begin = ids + batch.seqs.begin(s);
    prompts.emplace_back(begin, begin + prompt_lengths[static_cast<size_t>(s)]);
  }
  Tensor logits = decoder.prefill(prompts);
  for (int64_t step = 0; step <= steps; ++step) {
    inference::TokenIds next;
    for (int64_t s = 0; s < S; ++s) {
      const double error = relative_error(logits, s, reference, position(s, step));
      errors.decoder = std::max(errors.decoder, error);
      EXPECT_LE(error, tolerance) << "sequence " << s << " step " << step
                                  << (dtype == DType::f32 ? "" : " (2x the full bf16 forward's worst row)");
      if (step < steps) next.push_back(ids[position(s, step) + 1]);
    }
    if (step < steps) logits = decoder.step(next);
  }
  // The states hold what `linea params --inference` says (model/decoding_memory.h): recurrent
  // states in f32, inputs and KV caches in the compute dtype.
  const DecodingMemory memory = decoding_memory(config);
  double expected = 0;
  for (int64_t p : prompt_lengths) expected += memory.bytes_after(p + steps, dtype);
  EXPECT_EQ(double(decoder.state_bytes()), expected);
  return errors;
}

struct Case {
  std::string mixer;
  bool hybrid;
  int64_t window;
  DType dtype;
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const std::string& mixer : mixer_names()) {
    for (DType dtype : {DType::f32, DType::bf16}) {
      if (mixer == "rwkv6" && dtype == DType::bf16) continue;  // its layer refuses bf16 steps
      cases.push_back({mixer, false, 0, dtype});
      if (mixer != "attention") cases.push_back({mixer, true, 0, dtype});
    }
  }
  for (DType dtype : {DType::f32, DType::bf16}) {
    cases.push_back({"attention", false, 4, dtype});
    cases.push_back({"gdn", true, 3, dtype});
  }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return c.mixer + (c.hybrid ? "_hybrid" : "_pure") + (c.window ? "_window" + std::to_string(c.window) : "") + "_" +
         std::string(dtype_name(c.dtype));
}

class GpuDecoder : public testing::GpuTest, public ::testing::WithParamInterface<Case> {};

TEST_P(GpuDecoder, MatchesTheFullForward) {
  const Case& c = GetParam();
  worst->record(case_name({c, 0}), check_decoding(config_for(c.mixer, c.hybrid, c.window), c.dtype, {5, 1, 70}, 9));
}

INSTANTIATE_TEST_SUITE_P(Mixers, GpuDecoder, ::testing::ValuesIn(all_cases()), case_name);

class GpuDecoderBatch : public testing::GpuDtypeTest {};

// 40 sequences of prompts 1 … 40 tokens: the one-token kernels' grids span many sequences.
TEST_P(GpuDecoderBatch, FortySequencesMatchTheFullForward) {
  std::vector<int64_t> prompts;
  for (int64_t s = 1; s <= 40; ++s) prompts.push_back(s);
  for (const std::string& mixer : {std::string("gdn"), std::string("gla"), std::string("hgrn")}) {
    SCOPED_TRACE(mixer);
    worst->record(mixer + "_hybrid_40_sequences_" + std::string(dtype_name(GetParam())),
                  check_decoding(config_for(mixer, true, 0), GetParam(), prompts, 3));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuDecoderBatch, ::testing::Values(DType::f32, DType::bf16), testing::dtype_test_name);

}  // namespace
}  // namespace linea
