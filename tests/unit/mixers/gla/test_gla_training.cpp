// Every mixer of the gated-linear-attention family and HGRN trains on the CPU: 50 steps of a tiny
// model (tests/testing/mixers/gla_training.h) on the default corpus (the embedded dictionary,
// vocabulary 4096), pure and 3:1 with softmax attention; the loss starts near ln(4096) and falls.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/testing/mixers/gla_training.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/train_in_process.h"

namespace linea {
namespace {

struct TrainCase {
  std::string mixer, hybrid;
};

class GlaTraining : public ::testing::TestWithParam<TrainCase> {};

TEST_P(GlaTraining, LossFallsOnTheDefaultCorpus) {
  const TrainCase c = GetParam();
  testing::TempDir dir;
  const std::string text =
      testing::default_corpus_config({testing::gla_family_model(c.mixer, c.hybrid, 4096), "adamw", "3e-3", 5, 50, 8});
  const auto lines = testing::train_metrics(text, dir.path(), "t");
  ASSERT_EQ(lines.size(), 50u);
  const auto [first, last] = testing::expect_loss_falls(lines, 1.0, "[gla training] " + c.mixer + " " + c.hybrid);
  RecordProperty("loss_first5", std::to_string(first));
  RecordProperty("loss_last5", std::to_string(last));
}

std::vector<TrainCase> all_cases() {
  std::vector<TrainCase> cases;
  for (const std::string& mixer : testing::gla_family_mixers()) {
    for (const char* hybrid : {"pure", "3:1"}) cases.push_back({mixer, hybrid});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(PureAndHybrid, GlaTraining, ::testing::ValuesIn(all_cases()), [](const auto& info) {
  return info.param.mixer + (info.param.hybrid == "pure" ? "_pure" : "_3to1");
});

}  // namespace
}  // namespace linea
