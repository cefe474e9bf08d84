// Job processes: a run's job (mpirun and its ranks, or one `linea train`) starts in a session of its
// own, so that the coordinator can find and signal every process it started — mpirun gives each
// rank its own process group, but they all stay in the session — and tear a hung job down entirely.
// Linux-specific (/proc is read to list a session's processes).
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace linea::coordinator {

struct JobCommand {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  std::vector<std::string> env;   // "NAME=VALUE" entries added to (or replacing in) this environment
  std::string log_path;           // stdout and stderr are appended here; stdin is /dev/null
};

// Starts the job in a new session (its pid is the session id), with every descriptor above 2 closed.
// Throws std::runtime_error naming the program when it cannot be started.
pid_t spawn_job(const JobCommand& command);

// The live (not zombie) processes of session `sid`.
std::vector<pid_t> session_processes(pid_t sid);
// The state letter (R, S, D, T, t, Z, ...: proc(5)) of every thread of process `pid` that can still
// be read, by thread id; empty once the process has ended.
std::vector<std::pair<pid_t, char>> thread_states(pid_t pid);
// Sends `signal` to every live process of the session; returns how many were signalled.
int signal_session(pid_t sid, int signal);

// Reaps `pid` if it has ended (never blocks): its wait status, or nullopt while it runs.
std::optional<int> try_reap(pid_t pid);
// "exited with status 3", "killed by signal 9 (Killed)".
std::string describe_wait_status(int status);

// True when process `pid` exists and has the entry "NAME=VALUE" in its environment.
bool process_has_environment_entry(pid_t pid, std::string_view entry);
// Every other process (of those this user may inspect) with that entry in its environment: the jobs
// an earlier coordinator launched, found by the variable it gave them.
std::vector<pid_t> processes_with_environment_entry(std::string_view entry);

}  // namespace linea::coordinator
