// compare_losses (coordinator/loss_comparison.h): the largest step-by-step loss difference, its
// step and the verdict against a relative tolerance; logs of different steps or non-finite losses
// are errors naming the runs and the step.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "coordinator/loss_comparison.h"

namespace linea::coordinator {
namespace {

MetricsLog log_of(const std::vector<std::pair<int64_t, double>>& losses) {
  MetricsLog log;
  for (const auto& [step, loss] : losses) {
    MetricsPoint p;
    p.step = step;
    p.loss = loss;
    log.points.push_back(p);
  }
  return log;
}

TEST(LossComparison, FindsTheLargestDifferenceAndItsStep) {
  const MetricsLog reference = log_of({{1, 8.0}, {2, 6.0}, {3, 4.0}});
  const MetricsLog run = log_of({{1, 8.0}, {2, 6.03}, {3, 4.01}});  // relative 0.005 at step 2, 0.0025 at 3
  const LossComparison c = compare_losses(reference, run, 6e-3, "one", "tp2");
  EXPECT_EQ(c.steps, 3);
  EXPECT_NEAR(c.max_abs_diff, 0.03, 1e-12);
  EXPECT_NEAR(c.max_rel_diff, 0.005, 1e-12);
  EXPECT_EQ(c.worst_step, 2);
  EXPECT_DOUBLE_EQ(c.final_loss, 4.01);
  EXPECT_NEAR(c.final_abs_diff, 0.01, 1e-12);
  EXPECT_TRUE(c.pass);
  EXPECT_FALSE(compare_losses(reference, run, 4e-3, "one", "tp2").pass);
  EXPECT_TRUE(compare_losses(reference, reference, 0, "one", "one").pass);  // identical runs pass at 0
}

TEST(LossComparison, TheRelativeDifferenceIsAgainstTheReference) {
  const LossComparison c = compare_losses(log_of({{5, 2.0}}), log_of({{5, 2.2}}), 0.1, "a", "b");
  EXPECT_NEAR(c.max_rel_diff, 0.1, 1e-12);  // 0.2 / 2.0, not 0.2 / 2.2
  EXPECT_EQ(c.worst_step, 5);
}

TEST(LossComparison, DifferentStepsAreAnErrorNamingTheStep) {
  const MetricsLog reference = log_of({{1, 8.0}, {2, 6.0}, {3, 4.0}});
  try {
    compare_losses(reference, log_of({{1, 8.0}, {3, 4.0}}), 1, "runs/one", "runs/tp2");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("runs/tp2 against runs/one"), std::string::npos) << message;
    EXPECT_NE(message.find("runs/one logged step 2, runs/tp2 logged step 3"), std::string::npos) << message;
  }
  try {
    compare_losses(reference, log_of({{1, 8.0}, {2, 6.0}}), 1, "one", "short");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("one logged step 3, short logged no more steps"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(compare_losses(log_of({}), log_of({}), 1, "empty", "empty"), std::runtime_error);
}

TEST(LossComparison, NonFiniteLossesAndNegativeTolerancesAreErrors) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  try {
    compare_losses(log_of({{1, 8.0}, {2, 6.0}}), log_of({{1, 8.0}, {2, nan}}), 1, "one", "diverged");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("step 2 has no finite loss"), std::string::npos) << e.what();
  }
  EXPECT_THROW(compare_losses(log_of({{1, 8.0}}), log_of({{1, 8.0}}), -1, "a", "b"), std::invalid_argument);
}

}  // namespace
}  // namespace linea::coordinator
