// Cross-layer routing (model.routing) under tensor and data parallelism: `linea train` on all ranks
// as tp = 1 (dp = the number of ranks), tp = 2 (with 4 ranks: × dp 2) and tp = the number of ranks
// follows the one-rank loss trajectory over 8 steps, for CLER, CLER-H and CLVR of GDN and KDA in a
// 3:1 hybrid (tests/testing/routing_training.h's tiny model on synthetic shards; CLER's links
// cross heads sharded alike on sender and receiver, W_E and W_V are row-parallel like o_proj, λ
// sharded by head). The tolerance is measured as in mpi/test_gla_tensor_parallel.cpp: the one-rank
// run with its micro-batches summed in another order sets the rounding floor.
#include <gtest/gtest.h>

#include <string>

#include "tests/mpi/trainer_runs.h"
#include "tests/testing/routing_training.h"

namespace linea {
namespace {

std::string tiny_config() {
  return "device = \"cpu\"\n[run]\nname = \"routing\"\n" + testing::routed_model("gdn", "clvr", 64) + R"([optimizer]
kind = "muon"
lr = 3e-3
warmup_steps = 2
[train]
steps = 8
batch_seqs = 8
micro_batch_seqs = 2
seq_len = 32
eval_every = 4
eval_batches = 1
checkpoint_every = -1
threads = 1
[data]
vocab_size = 64
eos_id = 0
[parallel]
timeout_s = 60
)";
}

class RoutingParallel : public testing::TrainerRuns {
 protected:
  RoutingParallel() : TrainerRuns(tiny_config(), "routing") {}
};

TEST_F(RoutingParallel, EveryKindFollowsOneRank) {
  for (const char* mixer : {"gdn", "kda"}) {
    for (const std::string& kind : testing::routing_kinds()) {
      const std::string name = std::string(mixer) + "_" + kind;
      const std::vector<std::string> model = {"model.mixer=\"" + std::string(mixer) + "\"",
                                              "model.routing.kind=\"" + kind + "\""};
      const double floor = one_rank_floor(name, model, "train.micro_batch_seqs=1");
      for (int tp = 1; tp <= size_; tp *= 2) {
        std::vector<std::string> layout = model;
        layout.push_back("parallel.tp=" + std::to_string(tp));
        const std::string run_name = name + "_tp" + std::to_string(tp);
        run(MPI_COMM_WORLD, config(run_name, layout));
        const double worst = expect_same_trajectory(run_name, name + "_one", 1e-2);
        if (rank_ != 0) continue;
        EXPECT_LE(worst, std::max(1e-4, 4 * floor)) << run_name << ": rounding alone moves the run by " << floor;
        std::cout << "[routing tp=" << tp << " dp=" << size_ / tp << "] " << name << ": largest relative difference "
                  << worst << " (micro-batches reordered on one rank: " << floor << ")\n";
      }
    }
  }
}

}  // namespace
}  // namespace linea
