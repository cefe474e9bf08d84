// bench_data_parallel: the cost of running one training step as a TP × DP layout of R ranks
// instead of R independent one-rank jobs, with the same tokens per rank (so the same compute per
// rank, and the same load on a shared machine):
//   mpirun -np R bench_data_parallel CONFIG.toml [--tp N] [--zero 0|1] [--optimizer adamw|muon]
//                                    [--batch B] [--seq-len T] [--steps S] [key=value ...]
// A step is what the trainer does: forward_backward on B·T tokens, DistributedOptimizer::
// reduce_gradients (DP average + norm + clip) and step (update + refresh of the replicas). First
// every rank runs the step alone (a grid of one rank: no communication), then all R ranks run it as
// one tp × (R/tp) job. Each step is timed between barriers; the slowest rank's time is kept, and the
// median over S steps (after one warm-up) reported, split into forward_backward and optimizer.
// Rank 0 prints one JSON line; overhead = layout step time / alone step time (1 = free; with TP the
// model work per rank also shrinks, so it can be below 1).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "data/config_reader.h"
#include "kernels/random.h"
#include "model/model.h"
#include "parallel/mpi_session.h"
#include "parallel/process_grid.h"
#include "worker/distributed_optimizer.h"

namespace {

using namespace linea;
using Clock = std::chrono::steady_clock;

struct Timing {
  double step_ms = 0, model_ms = 0, optimizer_ms = 0;  // medians of the slowest rank
  double loss = 0;
};

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// S timed steps (after a warm-up) of `model` with `optimizer`; `world` holds every rank of the job
// (for the barriers and the slowest rank), whatever the layout being timed.
Timing time_steps(Model& model, DistributedOptimizer& optimizer, Communicator& world, const Tensor& ids,
                  const Tensor& targets, const SeqLayout& seqs, int64_t steps) {
  std::vector<double> step, model_part, optimizer_part;
  Tensor mine = Tensor::empty({2}, DType::f64), all = Tensor::empty({2 * world.size()}, DType::f64);
  Timing t;
  for (int64_t s = 0; s <= steps; ++s) {
    world.barrier();
    const auto start = Clock::now();
    model.params().zero_grads();
    t.loss = model.forward_backward(ids, targets, seqs);
    const auto middle = Clock::now();
    optimizer.reduce_gradients();
    optimizer.step(1e-3);
    const auto end = Clock::now();
    mine.data<double>()[0] = std::chrono::duration<double, std::milli>(middle - start).count();
    mine.data<double>()[1] = std::chrono::duration<double, std::milli>(end - middle).count();
    world.all_gather(mine, all);
    if (s == 0) continue;  // warm-up: sizes the arenas
    int slowest = 0;
    const double* a = all.data<double>();
    for (int r = 1; r < world.size(); ++r) {
      if (a[2 * r] + a[2 * r + 1] > a[2 * slowest] + a[2 * slowest + 1]) slowest = r;
    }
    step.push_back(a[2 * slowest] + a[2 * slowest + 1]);
    model_part.push_back(a[2 * slowest]);
    optimizer_part.push_back(a[2 * slowest + 1]);
  }
  t.step_ms = median(step);
  t.model_ms = median(model_part);
  t.optimizer_ms = median(optimizer_part);
  return t;
}

// One step time of `grid`'s layout on this rank's tokens.
Timing time_layout(ProcessGrid& grid, Communicator& world, const ModelConfig& config, const OptimizerConfig& optim,
                   bool zero, const Tensor& ids, const Tensor& targets, const SeqLayout& seqs, int64_t steps) {
  const TensorParallel tp = TensorParallel::over(grid.comm(GridAxis::tp));
  Model model(config, DType::f32, true, tp);
  model.init_parameters(1);
  DistributedOptimizer optimizer(optim, model.params(), grid.comm(GridAxis::dp), zero, tp);
  return time_steps(model, optimizer, world, ids, targets, seqs, steps);
}

}  // namespace

int main(int argc, char** argv) {
  MpiSession session(LaunchMode::auto_detect, &argc, &argv);
  if (argc < 2 || !std::strcmp(argv[1], "--help")) {
    std::fprintf(stderr,
                 "usage: mpirun -np R bench_data_parallel CONFIG.toml [--tp N] [--zero 0|1] [--optimizer adamw|muon] "
                 "[--batch B] [--seq-len T] [--steps S] [key=value ...]\n");
    return argc < 2 ? 2 : 0;
  }
  try {
    int64_t tp = 1;
    bool zero = true;
    OptimizerConfig optim;
    optim.kind = OptimizerKind::muon;
    const bench::ModelBenchArgs args = bench::parse_model_bench_args(
        argc, argv, 2, 256, 10,
        {{"tp", [&](const std::string& v) { tp = bench::parse_count("--tp", v); }},
         {"zero", [&](const std::string& v) { zero = v != "0"; }},
         {"optimizer", [&](const std::string& v) { optim.kind = parse_optimizer_kind(v, "--optimizer"); }}});
    const int64_t batch = args.batch, seq_len = args.seq_len, steps = args.steps;
    ConfigReader reader = ConfigReader::from_file(args.config, args.overrides);
    const ModelConfig config = ModelConfig::parse(reader.section("model"));
    reader.check_unknown_keys({"model"});
    ProcessGrid alone = ProcessGrid::create({1, 0}, {}, MPI_COMM_SELF);
    ProcessGrid layout = ProcessGrid::create({static_cast<int>(tp), 0});
    Communicator& world = layout.comm(GridAxis::world);

    // This rank's tokens: its DP replica's own (the TP ranks of a replica share them).
    const int64_t n = batch * seq_len;
    const SeqLayout seqs = SeqLayout::uniform(batch, seq_len);
    const bench::TokenBatch tokens =
        bench::random_token_batch(n, config.vocab, 2 + static_cast<uint64_t>(layout.dp_rank()));
    const Tensor &ids = tokens.ids, &targets = tokens.targets;

    const Timing one = time_layout(alone, world, config, optim, zero, ids, targets, seqs, steps);
    const Timing many = time_layout(layout, world, config, optim, zero, ids, targets, seqs, steps);
    if (session.world_rank() == 0) {
      std::printf(
          "{\"bench\": \"data_parallel_step\", \"config\": \"%s\", \"optimizer\": \"%s\", \"ranks\": %d, \"tp\": %d, "
          "\"dp\": %d, \"zero\": %s, \"tokens_per_rank\": %lld, \"alone_step_ms\": %.2f, \"alone_model_ms\": %.2f, "
          "\"alone_optimizer_ms\": %.2f, \"layout_step_ms\": %.2f, \"layout_model_ms\": %.2f, "
          "\"layout_optimizer_ms\": %.2f, \"overhead\": %.3f}\n",
          argv[1], std::string(optimizer_kind_name(optim.kind)).c_str(), layout.world_size(), layout.tp_size(),
          layout.dp_size(), zero ? "true" : "false", static_cast<long long>(n), one.step_ms, one.model_ms,
          one.optimizer_ms, many.step_ms, many.model_ms, many.optimizer_ms, many.step_ms / one.step_ms);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_data_parallel: rank %d: error: %s\n", session.world_rank(), e.what());
    session.abort(1);
  }
  return 0;
}
