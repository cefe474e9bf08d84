// FrozenJob: the ranks of a job (every process of its session but the leader, mpirun) stopped with
// SIGSTOP, so that a fault test reads a job's progress and breaks it at one point of its training:
// no rank computes, writes, checkpoints or sends a heartbeat in between. mpirun is left running: it
// does none of these, and it would forward the SIGCONT of a thaw to every rank, a rank meant to stay
// stopped included. SIGSTOP is asynchronous; the constructor returns once every thread of every rank
// has stopped (or ended), and throws std::runtime_error naming the thread when one has not within
// 10 s. rank(r) is the frozen process of MPI rank r (-1: none, e.g. the job has ended). thaw()
// sends SIGCONT to them all, or to all but one that is to stay stopped; the destructor thaws what
// is still frozen.
#pragma once
#include <signal.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/job_process.h"

namespace linea::testing {

class FrozenJob {
 public:
  // `session`: the job's first process, the leader of its session (as the coordinator starts jobs).
  explicit FrozenJob(pid_t session) {
    for (const pid_t p : coordinator::session_processes(session))
      if (p != session) pids_.push_back(p);
    for (const pid_t p : pids_) ::kill(p, SIGSTOP);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (const pid_t p : pids_) {
      for (std::string running = running_thread(p); !running.empty(); running = running_thread(p)) {
        if (std::chrono::steady_clock::now() > deadline) {
          thaw();
          throw std::runtime_error("FrozenJob: " + running + " did not stop within 10 s of SIGSTOP");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }
  ~FrozenJob() { thaw(); }
  FrozenJob(const FrozenJob&) = delete;
  FrozenJob& operator=(const FrozenJob&) = delete;

  pid_t rank(int r) const {
    const std::string entry = "OMPI_COMM_WORLD_RANK=" + std::to_string(r);
    for (const pid_t p : pids_)
      if (coordinator::process_has_environment_entry(p, entry)) return p;
    return -1;
  }

  // SIGCONT to every frozen process but `stays_stopped` (none by default); once.
  void thaw(pid_t stays_stopped = -1) {
    for (const pid_t p : pids_)
      if (p != stays_stopped) ::kill(p, SIGCONT);
    pids_.clear();
  }

 private:
  // "thread T of process P (state S)" for a thread of `pid` that is neither stopped nor ended; "" when
  // there is none (the process may have ended).
  static std::string running_thread(pid_t pid) {
    for (const auto& [tid, state] : coordinator::thread_states(pid)) {
      if (state != 'T' && state != 't' && state != 'Z' && state != 'X')
        return "thread " + std::to_string(tid) + " of process " + std::to_string(pid) + " (state " + state + ")";
    }
    return "";
  }

  std::vector<pid_t> pids_;
};

}  // namespace linea::testing
