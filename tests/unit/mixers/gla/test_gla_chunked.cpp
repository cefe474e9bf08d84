// The chunked gated-linear-attention op equals the recurrent reference: o, ht and every gradient,
// for every mixer preset, on shapes with T not a multiple of 64, head dims that are not powers of
// two, K ≠ V, several sequences, packed documents, with and without h0, and fla's gate normalizers
// {0.1, 1, 10} (and 0.01 on the packed shape: decays underflow to 0, nothing may overflow).
// f64 must agree to 1e-10; chunked f32 must stay within err_ratio 1e-5 of the recurrent f64
// reference. The largest err_ratio per mixer is printed at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>

#include "tests/testing/mixers/gla_problem.h"

namespace linea {
namespace {

using ops::GlaImpl;
using ops::GlaMixer;

const std::vector<testing::NamedShape>& shapes() {
  static const std::vector<testing::NamedShape> all = {
      {"B2_T75_H2_K60_V100", {{0, 75, 150}, 2, 60, 100, true}},
      {"B1_T130_H3_K48_V32_noh0", {{0, 130}, 3, 48, 32, false}},
      {"packed_15_100_300_H2_K32_V64", {{0, 15, 100, 300}, 2, 32, 64, true}},
  };
  return all;
}

struct EquivalenceCase {
  GlaMixer mixer;
  size_t shape;
  double normalizer;
};

std::string case_name(const ::testing::TestParamInfo<EquivalenceCase>& info) {
  const EquivalenceCase& c = info.param;
  return std::string(ops::gla_mixer_name(c.mixer)) + "_" + shapes()[c.shape].name + "_norm" +
         testing::normalizer_name(c.normalizer);
}

constexpr double kF64Tolerance = 1e-10;
constexpr double kF32Tolerance = 1e-5;

struct ErrRatioSummary : ::testing::Environment {
  struct Worst {
    double f32_vs_f64 = 0, f64 = 0;
  };
  std::map<std::string, Worst> worst;  // by mixer
  void TearDown() override {
    for (const auto& [mixer, w] : worst) {
      std::cout << "[gla err_ratio] " << mixer << ": chunked f32 vs recurrent f64 " << w.f32_vs_f64
                << " | chunked vs recurrent f64 " << w.f64 << "\n";
    }
  }
};
ErrRatioSummary* const summary =
    static_cast<ErrRatioSummary*>(::testing::AddGlobalTestEnvironment(new ErrRatioSummary));

class GlaChunkedVsRecurrent : public ::testing::TestWithParam<EquivalenceCase> {};

TEST_P(GlaChunkedVsRecurrent, OutputsStatesAndGradientsAgree) {
  const EquivalenceCase c = GetParam();
  const testing::GlaProblem p64 =
      testing::make_gla_problem(c.mixer, shapes()[c.shape].shape, c.normalizer, 1234 + c.shape);
  const testing::GlaProblem p32 = testing::cast_problem(p64, DType::f32);

  const auto ref64 = testing::run_forward_backward(GlaImpl::recurrent, p64).named();
  const auto got64 = testing::run_forward_backward(GlaImpl::chunked, p64).named();
  const auto got32 = testing::run_forward_backward(GlaImpl::chunked, p32).named();
  ASSERT_EQ(ref64.size(), got64.size());
  ASSERT_EQ(ref64.size(), got32.size());

  ErrRatioSummary::Worst worst;
  for (size_t i = 0; i < ref64.size(); ++i) {
    const std::string& name = ref64[i].first;
    ASSERT_EQ(name, got32[i].first);
    EXPECT_TRUE(testing::assert_close(name + " (f64)", ref64[i].second, got64[i].second, kF64Tolerance, 0));
    // atol 0: an absolute pass would hide relative errors of tiny tensors (dg under strong decay).
    EXPECT_TRUE(
        testing::assert_close(name + " (f32)", ref64[i].second, testing::to_f64(got32[i].second), kF32Tolerance, 0));
    worst.f32_vs_f64 =
        std::max(worst.f32_vs_f64, testing::compare(ref64[i].second, testing::to_f64(got32[i].second)).err_ratio);
    worst.f64 = std::max(worst.f64, testing::compare(ref64[i].second, got64[i].second).err_ratio);
  }
  RecordProperty("max_err_ratio_f32_vs_f64", std::to_string(worst.f32_vs_f64));
  ErrRatioSummary::Worst& w = summary->worst[std::string(ops::gla_mixer_name(c.mixer))];
  w.f32_vs_f64 = std::max(w.f32_vs_f64, worst.f32_vs_f64);
  w.f64 = std::max(w.f64, worst.f64);
}

std::vector<EquivalenceCase> all_cases() {
  std::vector<EquivalenceCase> cases;
  for (GlaMixer mixer : ops::gla_mixers()) {
    for (size_t shape = 0; shape < shapes().size(); ++shape) {
      if (mixer == GlaMixer::retnet) {  // a fixed decay: no normalizer
        cases.push_back({mixer, shape, 1.0});
        continue;
      }
      for (double normalizer : {0.1, 1.0, 10.0}) cases.push_back({mixer, shape, normalizer});
      if (shape == 2) cases.push_back({mixer, shape, 0.01});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllMixers, GlaChunkedVsRecurrent, ::testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace linea
