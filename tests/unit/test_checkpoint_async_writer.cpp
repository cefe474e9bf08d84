// AsyncCheckpointWriter: what is written is the state at save() time whatever the caller does
// afterwards, writes never overlap, failures are reported rather than thrown.
#include <gtest/gtest.h>

#include <fstream>

#include "checkpoint/async_checkpoint_writer.h"
#include "kernels/random.h"
#include "tests/testing/temp_dir.h"

namespace linea {
namespace {

namespace fs = std::filesystem;

CheckpointState state_with(int64_t step, const std::vector<std::pair<std::string, Tensor>>& tensors) {
  CheckpointState state;
  state.step = step;
  state.tokens = 1000 * step;
  state.config = "step " + std::to_string(step);
  state.data_position = {{"offset", step}};
  for (const auto& [name, tensor] : tensors) state.tensors.emplace_back(name, tensor);
  return state;
}

bool all_equal(const Tensor& t, float value) {
  const float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] != value) return false;
  }
  return true;
}

TEST(AsyncCheckpointWriter, CallerMayMutateItsTensorsRightAfterSave) {
  testing::TempDir root;
  Tensor weights = Tensor::empty({1 << 20}, DType::f32);  // 4 MB: the write is still running below
  Tensor moments = Tensor::empty({1 << 18}, DType::f64);
  AsyncCheckpointWriter writer(root.path(), 5);
  CheckpointState state = state_with(1, {{"weights", weights}, {"moments", moments}});
  for (int64_t step = 1; step <= 2; ++step) {  // the second save reuses the writer's buffers
    fill_constant(weights, static_cast<double>(step));
    fill_constant(moments, static_cast<double>(step));
    state.step = step;
    writer.save(state);
    fill_constant(weights, -1.0);  // the training loop goes on at once
    fill_constant(moments, -1.0);
    state.config = "changed";
    state.data_position["offset"] = -1;
  }
  writer.wait();
  EXPECT_FALSE(writer.is_busy());
  EXPECT_EQ(writer.last_error(), std::nullopt);
  for (int64_t step = 1; step <= 2; ++step) {
    const CheckpointState loaded = load_checkpoint(root.path() / checkpoint_directory_name(step));
    EXPECT_TRUE(all_equal(loaded.tensors[0].data, static_cast<float>(step))) << "step " << step;
    const double* m = loaded.tensors[1].data.data<double>();
    EXPECT_EQ(m[0], static_cast<double>(step));
    EXPECT_EQ(m[(1 << 18) - 1], static_cast<double>(step));
    EXPECT_EQ(loaded.config, step == 1 ? "step 1" : "changed");  // a state's fields are copied at save()
  }
  const CheckpointWriteStats stats = writer.last_stats();
  EXPECT_EQ(stats.step, 2);
  EXPECT_EQ(stats.bytes, (1 << 20) * 4 + (1 << 18) * 8);
  EXPECT_GT(stats.write_ms, 0.0);
  EXPECT_GE(stats.blocked_ms, stats.waiting_ms);
}

TEST(AsyncCheckpointWriter, WritesOneAtATimeAndKeepsTheLastK) {
  testing::TempDir root;
  Tensor t = Tensor::zeros({1000}, DType::f32);
  {
    AsyncCheckpointWriter writer(root.path(), 2);
    for (int64_t step = 10; step <= 40; step += 10) {
      fill_constant(t, static_cast<double>(step));
      writer.save(state_with(step, {{"t", t}}));
    }
  }  // the destructor waits for the last write
  std::vector<int64_t> steps;
  for (const CommittedCheckpoint& c : list_committed_checkpoints(root.path())) steps.push_back(c.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{30, 40}));
  const std::optional<CheckpointState> latest = load_latest_checkpoint(root.path());
  ASSERT_TRUE(latest.has_value());
  EXPECT_TRUE(all_equal(latest->tensors[0].data, 40.f));
}

TEST(AsyncCheckpointWriter, FailuresAreReportedNotThrown) {
  testing::TempDir root;
  const fs::path not_a_directory = root.path() / "file";
  std::ofstream(not_a_directory) << "x";
  AsyncCheckpointWriter writer(not_a_directory, 1);
  writer.save(state_with(1, {{"t", Tensor::zeros({4}, DType::f32)}}));
  writer.wait();
  ASSERT_TRUE(writer.last_error().has_value());
  EXPECT_NE(writer.last_error()->find(not_a_directory.string()), std::string::npos) << *writer.last_error();

  // Bad state is rejected at once, on the caller's thread.
  EXPECT_THROW(writer.save(state_with(-1, {})), std::invalid_argument);
  EXPECT_THROW(AsyncCheckpointWriter(root.path(), 0), std::invalid_argument);

  AsyncCheckpointWriter good(root.path() / "ok", 1);
  good.save(state_with(3, {{"t", Tensor::zeros({4}, DType::f32)}}));
  good.wait();
  EXPECT_EQ(good.last_error(), std::nullopt);
}

}  // namespace
}  // namespace linea
