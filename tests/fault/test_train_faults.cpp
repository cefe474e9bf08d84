// Fault tests of `linea train` as users run it: the real binary under `mpirun -np 2`, with one rank
// broken from outside while the job trains (synthetic shards, a tiny model):
// - a rank that stops answering (SIGSTOP): the other times out after parallel.timeout_s, says so,
//   and ends the whole job (MPI_Abort): the job exits with an error instead of hanging;
// - a rank that is killed (SIGKILL): mpirun ends the job; started again, the run resumes from its
//   last committed checkpoint and continues exactly (bit for bit) as a run that was never killed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_directory.h"
#include "tests/testing/synthetic_shards.h"
#include "tests/testing/temp_dir.h"

namespace linea {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One `mpirun -np 2 linea train CONFIG OVERRIDES...` job, its output in a log file.
class Job {
 public:
  Job(const fs::path& config, const std::vector<std::string>& overrides, const fs::path& log) : log_(log) {
    std::vector<std::string> args = {
        MPIEXEC, "-np", "2", "--oversubscribe", "--allow-run-as-root", LINEA_BINARY, "train", config.string()};
    args.insert(args.end(), overrides.begin(), overrides.end());
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(MPIEXEC, argv.data());
      _exit(127);
    }
  }
  ~Job() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // The exit status once the job has ended; fails the test if it runs longer than `limit`.
  int wait(std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        ADD_FAILURE() << "the job still runs after " << limit.count() << " s (hangs?); log:\n" << output();
        return -1;
      }
      std::this_thread::sleep_for(50ms);
    }
    exited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // The process of MPI rank `rank` (a child of mpirun with OMPI_COMM_WORLD_RANK = rank).
  pid_t rank_pid(int rank) const {
    for (const auto& entry : fs::directory_iterator("/proc")) {
      const std::string name = entry.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::istringstream stat(read_text(entry.path() / "stat"));
      std::string pid, comm, state;
      pid_t parent = 0;
      stat >> pid >> comm >> state >> parent;
      if (parent != pid_) continue;
      const std::string environment = read_text(entry.path() / "environ");
      if (environment.find(std::string("OMPI_COMM_WORLD_RANK=") + std::to_string(rank) + '\0') != std::string::npos) {
        return static_cast<pid_t>(std::stol(name));
      }
    }
    return -1;
  }

  std::string output() const { return read_text(log_); }

 private:
  fs::path log_;
  pid_t pid_ = -1;
  bool exited_ = false;
};

class TrainFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::make_synthetic_data(tmp_.path() / "data");
    config_ = tmp_.path() / "run.toml";
    std::ofstream(config_) << R"(device = "cpu"
[run]
name = "faulty"
[model]
d_model = 32
layers = 2
vocab = 64
mixer = "gdn"
hybrid = "1:1"
[model.linear]
heads = 2
d_k = 16
d_v = 16
[model.attention]
heads = 2
head_dim = 16
[optimizer]
kind = "muon"
lr = 1e-2
warmup_steps = 3
[train]
steps = 100000
batch_seqs = 8
micro_batch_seqs = 2
seq_len = 32
eval_every = 0
checkpoint_every = 5
keep_checkpoints = 100
threads = 1
[data]
vocab_size = 64
eos_id = 0
)";
  }

  std::vector<std::string> overrides(const std::string& dir, std::vector<std::string> more = {}) {
    more.push_back("run.dir=" + (tmp_.path() / dir).string());
    more.push_back("data.path=" + (tmp_.path() / "data").string());
    return more;
  }

  // Waits until `condition` holds (polling), failing the test after `limit`.
  static bool eventually(const std::function<bool()>& condition, std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (!condition()) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(20ms);
    }
    return true;
  }

  std::vector<json> metrics(const std::string& dir) {
    std::ifstream in(tmp_.path() / dir / "faulty" / "metrics.jsonl");
    std::vector<json> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
    return lines;
  }

  testing::TempDir tmp_;
  fs::path config_;
};

TEST_F(TrainFaults, AStoppedRankEndsTheJobWithATimeoutNotAHang) {
  Job job(config_, overrides("stall", {"parallel.timeout_s=2"}), tmp_.path() / "stall.log");
  ASSERT_TRUE(eventually([&] { return metrics("stall").size() >= 3; }, 120s)) << job.output();
  const pid_t rank1 = job.rank_pid(1);
  ASSERT_GT(rank1, 0);
  kill(rank1, SIGSTOP);
  const int status = job.wait(120s);
  kill(rank1, SIGKILL);  // in case mpirun left it stopped
  EXPECT_NE(status, 0);
  const std::string log = job.output();
  EXPECT_NE(log.find("linea train (rank 0 of 2): error: communicator"), std::string::npos) << log;
  EXPECT_NE(log.find("not complete after 2000 ms"), std::string::npos) << log;
  EXPECT_NE(log.find("linea train (rank 0 of 2): ending the whole job"), std::string::npos) << log;
}

TEST_F(TrainFaults, AKilledRankEndsTheJobAndTheRunResumesExactly) {
  const fs::path checkpoints = tmp_.path() / "killed" / "faulty" / "checkpoints";
  int64_t committed = 0;
  {
    Job job(config_, overrides("killed"), tmp_.path() / "killed.log");
    ASSERT_TRUE(eventually([&] { return !list_committed_checkpoints(checkpoints).empty(); }, 120s)) << job.output();
    const pid_t rank1 = job.rank_pid(1);
    ASSERT_GT(rank1, 0);
    kill(rank1, SIGKILL);
    EXPECT_NE(job.wait(120s), 0);
    committed = list_committed_checkpoints(checkpoints).back().step;
  }
  // Started again: it resumes from the newest committed checkpoint and runs 10 more steps.
  const std::string stop = "train.stop_at=" + std::to_string(committed + 10);
  Job resumed(config_, overrides("killed", {stop}), tmp_.path() / "resumed.log");
  ASSERT_EQ(resumed.wait(120s), 0) << resumed.output();
  EXPECT_NE(resumed.output().find("resumed from " + (checkpoints / checkpoint_directory_name(committed)).string()),
            std::string::npos)
      << resumed.output();
  Job whole(config_, overrides("whole", {stop}), tmp_.path() / "whole.log");
  ASSERT_EQ(whole.wait(120s), 0) << whole.output();

  const auto a = metrics("killed"), b = metrics("whole");
  ASSERT_EQ(a.size(), static_cast<size_t>(committed + 10));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    for (const char* key : {"step", "loss", "grad_norm", "lr", "tokens"}) {
      EXPECT_EQ(a[i][key], b[i][key]) << key << " at step " << i + 1;
    }
  }
}

}  // namespace
}  // namespace linea
