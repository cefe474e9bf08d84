// bench_tensor_parallel: Model::forward_backward (f32, CPU) split over R tensor-parallel ranks
// against the whole model on each rank, with the same tokens per rank.
//   mpirun -np R bench_tensor_parallel CONFIG.toml [--batch B] [--seq-len T] [--steps S] [key=value ...]
// Every rank first runs the whole model (TP = 1, no communication) on its B·T tokens, then all R
// ranks run one TP = R model on those same tokens. Each step is timed between barriers; the
// slowest rank's wall time and its process CPU time are kept and the median over S steps (after a
// warm-up step) is reported. Rank 0 prints one JSON line; speedup = TP = 1 time / TP = R time
// (ideally R: each rank does 1/R of the work, plus 4 all-reduces of [B·T, D] per layer).
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

namespace {

using namespace linea;

struct Timing {
  double wall_ms = 0, cpu_ms = 0, loss = 0;
  int64_t params = 0;
};

// Median over `steps` of the slowest rank's step (wall and CPU time), after one warm-up step.
Timing time_steps(Model& model, Communicator& world, const Tensor& ids, const Tensor& targets, const SeqLayout& seqs,
                  int64_t steps) {
  Timing result;
  result.params = model.params().numel();
  result.loss = model.forward_backward(ids, targets, seqs);  // warm-up: sizes the arenas
  std::vector<double> wall, cpu;
  Tensor slowest = Tensor::empty({2}, DType::f64), all = Tensor::empty({world.size(), 2}, DType::f64);
  for (int64_t s = 0; s < steps; ++s) {
    world.barrier();
    const double cpu_start = bench::process_cpu_ms();
    const auto start = std::chrono::steady_clock::now();
    result.loss = model.forward_backward(ids, targets, seqs);
    slowest.data<double>()[0] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    slowest.data<double>()[1] = (bench::process_cpu_ms() - cpu_start) / 1e3;
    world.all_gather(slowest, all);
    int worst = 0;
    for (int r = 1; r < world.size(); ++r) {
      if (all.data<double>()[2 * r] > all.data<double>()[2 * worst]) worst = r;
    }
    wall.push_back(all.data<double>()[2 * worst] * 1e3);
    cpu.push_back(all.data<double>()[2 * worst + 1] * 1e3);
  }
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  result.wall_ms = median(wall);
  result.cpu_ms = median(cpu);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  MpiSession session(LaunchMode::auto_detect, &argc, &argv);
  if (argc < 2 || !std::strcmp(argv[1], "--help")) {
    std::fprintf(stderr,
                 "usage: mpirun -np R bench_tensor_parallel CONFIG.toml [--batch B] [--seq-len T] [--steps S] "
                 "[key=value ...]\n");
    return argc < 2 ? 2 : 0;
  }
  try {
    const bench::ModelBenchArgs args = bench::parse_model_bench_args(argc, argv, 2, 256, 5);
    const int64_t batch = args.batch, seq_len = args.seq_len, steps = args.steps;
    ConfigReader reader = ConfigReader::from_file(args.config, args.overrides);
    const ModelConfig config = ModelConfig::parse(reader.section("model"));
    reader.check_unknown_keys({"model"});
    ProcessGrid grid = ProcessGrid::create({session.world_size(), 1});
    Communicator& world = grid.comm(GridAxis::world);

    const int64_t n = batch * seq_len;
    const SeqLayout seqs = SeqLayout::uniform(batch, seq_len);
    const bench::TokenBatch tokens = bench::random_token_batch(n, config.vocab, 2);
    const Tensor &ids = tokens.ids, &targets = tokens.targets;

    Timing whole, split;
    {
      Model model(config, DType::f32);
      model.init_parameters(1);
      whole = time_steps(model, world, ids, targets, seqs, steps);
    }
    {
      Model model(config, DType::f32, true, TensorParallel::over(grid.comm(GridAxis::tp)));
      model.init_parameters(1);
      split = time_steps(model, world, ids, targets, seqs, steps);
    }
    if (session.world_rank() == 0) {
      std::printf(
          "{\"bench\": \"tensor_parallel_forward_backward\", \"config\": \"%s\", \"tp\": %d, \"tokens_per_rank\": "
          "%lld, \"params_tp1\": %lld, \"params_per_rank\": %lld, \"tp1_step_ms\": %.2f, \"tp_step_ms\": %.2f, "
          "\"speedup\": %.3f, \"tp1_cpu_ms\": %.2f, \"tp_cpu_ms\": %.2f, \"loss_tp1\": %.6f, \"loss_tp\": %.6f}\n",
          argv[1], grid.tp_size(), static_cast<long long>(n), static_cast<long long>(whole.params),
          static_cast<long long>(split.params), whole.wall_ms, split.wall_ms, whole.wall_ms / split.wall_ms,
          whole.cpu_ms, split.cpu_ms, whole.loss, split.loss);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_tensor_parallel: rank %d: error: %s\n", session.world_rank(), e.what());
    session.abort(1);
  }
  return 0;
}
