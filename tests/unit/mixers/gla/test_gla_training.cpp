// Every mixer of the gated-linear-attention family and HGRN trains on the CPU: 50 steps of a tiny
// model (tests/testing/mixers/gla_training.h) on the default corpus (the embedded dictionary,
// vocabulary 4096), pure and 3:1 with softmax attention; the loss starts near ln(4096) and falls.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
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
      "device = \"cpu\"\n[run]\nname = \"t\"\n" + testing::gla_family_model(c.mixer, c.hybrid, 4096) + R"([optimizer]
kind = "adamw"
lr = 3e-3
warmup_steps = 5
[train]
steps = 50
batch_seqs = 8
seq_len = 64
eval_every = 0
checkpoint_every = -1
[data]
path = "default"
)";
  const auto lines = testing::train_metrics(text, dir.path(), "t");
  ASSERT_EQ(lines.size(), 50u);
  const double first = testing::mean_loss(lines, 0, 5), last = testing::mean_loss(lines, 45, 50);
  EXPECT_NEAR(lines.front()["loss"].get<double>(), std::log(4096.0), 0.3);
  EXPECT_LT(last, first - 1.0) << c.mixer << " " << c.hybrid << ": " << first << " → " << last;
  RecordProperty("loss_first5", std::to_string(first));
  RecordProperty("loss_last5", std::to_string(last));
  std::cout << "[gla training] " << c.mixer << " " << c.hybrid << ": mean loss of steps 1–5 " << first
            << ", of steps 46–50 " << last << "\n";
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
