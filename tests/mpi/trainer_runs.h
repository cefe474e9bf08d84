// TrainerRuns: the fixture of the tests that run `linea train` on several ranks under mpirun
// (tests/mpi/test_trainer_parallel.cpp, tests/mpi/cuda/test_nccl_trainer_parallel.cpp). Rank 0
// writes synthetic shards into a directory every rank sees; config() parses the test's TOML text
// with run.dir and data.path pointing there; run() trains on a communicator, run_alone() on rank 0
// alone (the one-rank reference); expect_same_trajectory() compares two runs' metrics.jsonl step by
// step (on rank 0, which writes them); copy_run() copies a run so that another job resumes it.
// one_rank_floor() measures the rounding floor of a comparison with the one-rank run.
#pragma once
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "parallel/mpi_comm.h"
#include "tests/mpi/shared_directory.h"
#include "tests/testing/json_lines.h"
#include "tests/testing/synthetic_shards.h"
#include "worker/run_config.h"
#include "worker/trainer.h"

namespace linea::testing {

class TrainerRuns : public ::testing::Test {
 protected:
  // config_text: a run config whose [run] name is run_name.
  TrainerRuns(std::string config_text, std::string run_name)
      : config_text_(std::move(config_text)), run_name_(std::move(run_name)) {}

  void SetUp() override {
    rank_ = comm_rank(MPI_COMM_WORLD);
    size_ = comm_size(MPI_COMM_WORLD);
    if (rank_ == 0) make_synthetic_data(root_.path() / "data");
    MPI_Barrier(MPI_COMM_WORLD);
  }

  RunConfig config(const std::string& run_dir, std::vector<std::string> overrides = {}) const {
    overrides.push_back("run.dir=" + (root_.path() / run_dir).string());
    overrides.push_back("data.path=" + (root_.path() / "data").string());
    return parse_run_config(config_text_, run_name_ + ".toml", overrides);
  }

  // Trains on the ranks of `comm` (every rank of it calls).
  TrainSummary run(MPI_Comm comm, const RunConfig& c, std::function<void(const nlohmann::json&)> on_step = {}) const {
    std::ostringstream log;
    TrainOptions options;
    options.world = comm;
    options.on_step = std::move(on_step);
    return train(c, log, options);
  }

  // The one-rank run, trained by rank 0 alone.
  void run_alone(const RunConfig& c) const {
    if (rank_ == 0) run(MPI_COMM_SELF, c);
    MPI_Barrier(MPI_COMM_WORLD);
  }

  std::vector<nlohmann::json> metrics(const std::string& run_dir) const {
    return json_lines(root_.path() / run_dir / run_name_ / "metrics.jsonl");
  }

  // Loss, gradient norm and val loss step by step within `relative`; returns the largest relative
  // difference seen (0 on ranks other than 0).
  double expect_same_trajectory(const std::string& a, const std::string& b, double relative) const {
    if (rank_ != 0) return 0;
    SCOPED_TRACE(a + " vs " + b);
    const auto x = metrics(a), y = metrics(b);
    EXPECT_EQ(x.size(), y.size());
    EXPECT_FALSE(x.empty());
    double worst = 0;
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
      EXPECT_EQ(x[i]["step"], y[i]["step"]);
      for (const char* key : {"loss", "grad_norm", "val_loss"}) {
        EXPECT_EQ(x[i].contains(key), y[i].contains(key)) << key << " at line " << i;
        if (!x[i].contains(key) || !y[i].contains(key)) continue;
        const double u = x[i][key].get<double>(), v = y[i][key].get<double>();
        worst = std::max(worst, std::abs(u - v) / std::abs(v));
        EXPECT_NEAR(u, v, relative * std::abs(v)) << key << " at step " << x[i]["step"];
      }
    }
    return worst;
  }

  // The rounding floor of a comparison with the one-rank run of `overrides`: trains it as run
  // `name`_one and, with its micro-batches summed in another order (`reorder`, such as
  // "train.micro_batch_seqs=2"), as `name`_reordered, both on rank 0 alone; returns their largest
  // relative difference (expect_same_trajectory within 1e-2).
  double one_rank_floor(const std::string& name, const std::vector<std::string>& overrides,
                        const std::string& reorder) const {
    std::vector<std::string> reordered = overrides;
    reordered.push_back(reorder);
    run_alone(config(name + "_one", overrides));
    run_alone(config(name + "_reordered", reordered));
    return expect_same_trajectory(name + "_reordered", name + "_one", 1e-2);
  }

  // Copies run `from` into run `to` (rank 0), so that another job can resume it.
  void copy_run(const std::string& from, const std::string& to) const {
    namespace fs = std::filesystem;
    if (rank_ == 0) fs::copy(root_.path() / from, root_.path() / to, fs::copy_options::recursive);
    MPI_Barrier(MPI_COMM_WORLD);
  }

  SharedDirectory root_;
  int rank_ = 0, size_ = 1;

 private:
  std::string config_text_, run_name_;
};

}  // namespace linea::testing
