// Child processes for the fault tests: a program started with its stdout and stderr in a log file
// (killed with SIGKILL if the test leaves before it ended), waited for with a deadline; the
// processes of the MPI ranks an mpirun started (found in /proc: children of mpirun whose
// environment holds OMPI_COMM_WORLD_RANK); polling for a condition with a deadline.
#pragma once
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace linea::testing {

inline std::string read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ChildProcess {
 public:
  // Starts args[0] (a path) with arguments args[1...]; its output goes to `log`.
  ChildProcess(std::vector<std::string> args, const std::filesystem::path& log) : log_(log) {
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~ChildProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The exit status once the process has ended (128 + N after signal N); fails the test and returns
  // -1 if it still runs after `limit`.
  int wait(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "the process still runs after " << limit.count() << " ms (hangs?); log:\n" << output();
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    exited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  pid_t pid() const { return pid_; }
  std::string output() const { return read_whole_file(log_); }

 private:
  std::filesystem::path log_;
  pid_t pid_ = -1;
  bool exited_ = false;
};

// The process of MPI rank `rank` among the children of the mpirun `mpirun_pid`; -1 when there is none.
inline pid_t mpi_rank_pid(pid_t mpirun_pid, int rank) {
  const std::string wanted = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank) + '\0';
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::istringstream stat(read_whole_file(entry.path() / "stat"));
    std::string pid, comm, state;
    pid_t parent = 0;
    stat >> pid >> comm >> state >> parent;
    if (parent != mpirun_pid) continue;
    if (read_whole_file(entry.path() / "environ").find(wanted) != std::string::npos) {
      return static_cast<pid_t>(std::stol(name));
    }
  }
  return -1;
}

// Polls `condition` every 10 ms until it holds (true) or `limit` has passed (false).
inline bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace linea::testing
