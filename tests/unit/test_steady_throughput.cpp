// steady_throughput (coordinator/steady_throughput.h): tokens over summed step times after the
// warm-up steps, from the trainer's metrics lines (tokens so far, the step's tokens_per_s).
#include <gtest/gtest.h>

#include <stdexcept>

#include "coordinator/steady_throughput.h"

namespace linea::coordinator {
namespace {

// A run of `tokens_per_step` tokens a step, whose steps took the given seconds.
MetricsLog run_log(double tokens_per_step, const std::vector<double>& step_seconds) {
  MetricsLog log;
  for (size_t i = 0; i < step_seconds.size(); ++i) {
    MetricsPoint p;
    p.step = static_cast<int64_t>(i + 1);
    p.tokens = tokens_per_step * static_cast<double>(p.step);
    p.tokens_per_s = tokens_per_step / step_seconds[i];
    log.points.push_back(p);
  }
  return log;
}

TEST(SteadyThroughput, TokensOverTheSummedStepTimesAfterTheWarmUp) {
  // Two slow warm-up steps, then 1, 2 and 1 s: 3000 tokens in 4 s (the mean of the step rates,
  // 833, would overweight the fast steps).
  const SteadyThroughput t = steady_throughput(run_log(1000, {30, 10, 1, 2, 1}), 2, "run");
  EXPECT_EQ(t.steps, 3);
  EXPECT_DOUBLE_EQ(t.tokens, 3000);
  EXPECT_DOUBLE_EQ(t.seconds, 4);
  EXPECT_DOUBLE_EQ(t.tokens_per_s, 750);
  EXPECT_NEAR(t.mean_step_s, 4.0 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(steady_throughput(run_log(1000, {2, 2}), 0, "run").tokens_per_s, 500);
}

TEST(SteadyThroughput, UsesTheLoggedStepTimeWhenThereIsOne) {
  MetricsLog log = run_log(1000, {1, 1});
  log.points[1].step_time_s = 4.0;
  EXPECT_DOUBLE_EQ(steady_throughput(log, 1, "run").tokens_per_s, 250);
}

TEST(SteadyThroughput, NoStepAfterTheWarmUpIsAnErrorNamingTheRun) {
  try {
    steady_throughput(run_log(1000, {1, 1}), 2, "runs/scaling_tp2");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("runs/scaling_tp2: no logged step after the 2 warm-up steps"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(steady_throughput(run_log(1000, {1}), -1, "run"), std::invalid_argument);
}

}  // namespace
}  // namespace linea::coordinator
