// coordinator_fake_worker: a stand-in for `linea train` in the coordinator's tests, launched by the
// coordinator as `coordinator_fake_worker [train] CONFIG key=value...` (the optional `train` lets a
// test use the default launch templates with this program as {linea}), alone or as the ranks of an
// mpirun job. It behaves like the trainer where the coordinator can see it: rank 0 resumes from its
// last committed checkpoint, appends one metrics.jsonl line
// per step and, at the end, a {"finished": true} line (also when a relaunch finds nothing left to
// do, as a trainer asked to continue a finished run would), reports through
// HeartbeatClient::from_env(), and can be told to fail:
//   run.dir, run.name        it works in RUN_DIR/RUN_NAME (as the trainer does)
//   fake.steps               steps in all (default 20)
//   fake.step_ms             time per step (default 20)
//   fake.checkpoint_every    commit a checkpoint every k steps (default 5)
//   fake.crash_at            SIGKILL itself after this step (default: never)
//   fake.hang_at             SIGSTOP itself after this step (default: never)
//   fake.checkpoint_fail_at  after this step, report a failed checkpoint write in a heartbeat and
//                            exit with status 1, as a trainer whose disk is full (default: never)
//   fake.fault_attempts      how many attempts (from 0) fail; later ones run clean (default 1)
//   fake.fault_rank          the rank that fails (default 0)
//   fake.exit_delay_ms       after the "finished" line, wait this long before exiting, silent, as a
//                            job slow to leave MPI_Finalize on a loaded machine (default 0)
// Under mpirun the ranks meet in an MPI_Barrier every step, as a trainer's ranks meet in their
// collectives (so a dead rank stalls the others until mpirun ends the job); only rank 0 writes and
// reports. Launched alone, it does not touch MPI.
// The loss is a fixed function of the step, so a resumed run logs the same numbers. A test counts
// the "finished" lines to see how many times a run was trained to completion.
#include <mpi.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <string>
#include <thread>

#include "coordinator/client.h"
#include "coordinator/coordinator.h"
#include "data/atomic_file.h"
#include "parallel/openmpi_leak_suppressions.h"

namespace {

using linea::coordinator::HeartbeatClient;

std::map<std::string, std::string> parse_overrides(int first, int argc, char** argv) {
  std::map<std::string, std::string> values;
  for (int i = first; i < argc; ++i) {
    const std::string word = argv[i];
    const size_t eq = word.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("expected key=value, got " + word);
    std::string value = word.substr(eq + 1);
    try {  // a TOML literal ("..." or '...' strings, numbers); anything else is a bare string
      const toml::table t = toml::parse("v = " + value);
      if (const auto* s = t.get("v")->as_string()) value = s->get();
    } catch (const toml::parse_error&) {
    }
    values[word.substr(0, eq)] = value;
  }
  return values;
}

int64_t integer(const std::map<std::string, std::string>& values, const std::string& key, int64_t fallback) {
  auto it = values.find(key);
  return it == values.end() ? fallback : std::stoll(it->second);
}

double loss_at(int64_t step) { return 2.0 + 8.0 * std::exp(-static_cast<double>(step) / 20.0); }

// MPI for the length of main() when launched by mpirun.
class MpiSession {
 public:
  MpiSession() : active_(std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr) {
    if (!active_) return;
    MPI_Init(nullptr, nullptr);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    rank_ = rank;
    size_ = size;
  }
  ~MpiSession() {
    if (active_) MPI_Finalize();
  }
  void barrier() const {
    if (active_) MPI_Barrier(MPI_COMM_WORLD);
  }
  int64_t rank() const { return rank_; }
  int64_t size() const { return size_; }

 private:
  bool active_;
  int64_t rank_ = 0;
  int64_t size_ = 1;
};

}  // namespace

int main(int argc, char** argv) {
  const int config_arg = argc > 1 && std::string(argv[1]) == "train" ? 2 : 1;
  if (argc <= config_arg) {
    std::fprintf(stderr, "usage: coordinator_fake_worker [train] CONFIG key=value...\n");
    return 2;
  }
  if (!std::filesystem::is_regular_file(argv[config_arg])) {
    std::fprintf(stderr, "coordinator_fake_worker: no config file %s\n", argv[config_arg]);
    return 2;
  }
  const auto values = parse_overrides(config_arg + 1, argc, argv);
  const std::string run_dir = values.at("run.dir") + "/" + values.at("run.name");
  const int64_t steps = integer(values, "fake.steps", 20);
  const int64_t step_ms = integer(values, "fake.step_ms", 20);
  const int64_t checkpoint_every = integer(values, "fake.checkpoint_every", 5);
  const int64_t crash_at = integer(values, "fake.crash_at", -1);
  const int64_t hang_at = integer(values, "fake.hang_at", -1);
  const int64_t checkpoint_fail_at = integer(values, "fake.checkpoint_fail_at", -1);
  const int64_t fault_attempts = integer(values, "fake.fault_attempts", 1);
  const int64_t exit_delay_ms = integer(values, "fake.exit_delay_ms", 0);
  const char* attempt_text = std::getenv("LINEA_ATTEMPT");
  const int64_t attempt = attempt_text ? std::atoll(attempt_text) : 0;
  const MpiSession mpi;
  const bool faulty = attempt < fault_attempts && mpi.rank() == integer(values, "fake.fault_rank", 0);
  std::filesystem::create_directories(run_dir);

  int64_t checkpoint = -1;  // the last committed step
  if (std::ifstream in(run_dir + "/checkpoint"); in) in >> checkpoint;
  mpi.barrier();  // every rank has read the checkpoint before rank 0 may write the next one
  if (mpi.rank() != 0) {
    for (int64_t step = checkpoint + 1; step < steps; ++step) {
      std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
      if (faulty && step == crash_at) std::raise(SIGKILL);
      if (faulty && step == hang_at) std::raise(SIGSTOP);
      mpi.barrier();
    }
    return 0;
  }
  auto coordinator = HeartbeatClient::from_env(mpi.size());
  std::ofstream metrics(run_dir + "/metrics.jsonl", std::ios::app);
  for (int64_t step = checkpoint + 1; step < steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double tokens_per_s = 1000.0 / seconds;
    metrics << "{\"step\": " << step << ", \"loss\": " << loss_at(step) << ", \"tokens_per_s\": " << tokens_per_s
            << ", \"step_time_s\": " << seconds << ", \"attempt\": " << attempt << ", \"time\": " << std::fixed
            << std::setprecision(6) << linea::coordinator::unix_now() << std::defaultfloat << std::setprecision(6);
    if (step % 5 == 4) metrics << ", \"val_loss\": " << loss_at(step) + 0.1;
    metrics << "}" << std::endl;
    // The step is logged before its checkpoint commits, so a kill in between loses no metrics line.
    if (checkpoint_every > 0 && (step + 1) % checkpoint_every == 0) {
      linea::data::write_file_atomically(run_dir + "/checkpoint", std::to_string(step) + "\n");
      checkpoint = step;
    }
    if (faulty && step == checkpoint_fail_at) {
      const std::string error = "the checkpoint of step " + std::to_string(step) + " failed: No space left on device";
      if (coordinator) coordinator->heartbeat({step, loss_at(step), tokens_per_s, std::nullopt, checkpoint, error});
      std::fprintf(stderr, "coordinator_fake_worker: error: %s\n", error.c_str());
      return 1;  // the client sends the heartbeat as it goes
    }
    if (coordinator) coordinator->heartbeat({step, loss_at(step), tokens_per_s, std::nullopt, checkpoint});
    if (faulty && step == crash_at) std::raise(SIGKILL);
    if (faulty && step == hang_at) std::raise(SIGSTOP);
    mpi.barrier();
  }
  metrics << "{\"finished\": true, \"attempt\": " << attempt << ", \"world_size\": " << mpi.size() << "}" << std::endl;
  std::this_thread::sleep_for(std::chrono::milliseconds(exit_delay_ms));
  return 0;
}
