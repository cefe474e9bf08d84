#include "coordinator/job_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>

extern char** environ;

namespace linea::coordinator {
namespace {

// The fields of /proc/PID/stat after the command name: state, ppid, pgrp, session.
struct ProcStat {
  char state = '?';
  pid_t session = -1;
};

// The stat file of a process or thread (/proc/PID/stat, /proc/PID/task/TID/stat); nullopt when it
// cannot be read (it has ended).
std::optional<ProcStat> read_stat(const std::string& path) {
  // One line. Read through the istream, which turns a failed read (ESRCH: the process ended after
  // the open) into badbit; an istreambuf_iterator would let the filebuf's exception through.
  std::ifstream in(path);
  std::string text;
  if (!std::getline(in, text)) return std::nullopt;
  const size_t close_paren = text.rfind(')');  // the command name may itself hold ')' or spaces
  if (close_paren == std::string::npos) return std::nullopt;
  ProcStat st;
  long ppid = 0, pgrp = 0, session = 0;
  if (std::sscanf(text.c_str() + close_paren + 1, " %c %ld %ld %ld", &st.state, &ppid, &pgrp, &session) != 4)
    return std::nullopt;
  st.session = static_cast<pid_t>(session);
  return st;
}

std::optional<ProcStat> read_proc_stat(pid_t pid) { return read_stat("/proc/" + std::to_string(pid) + "/stat"); }

std::string errno_text(int err) { return std::strerror(err); }

// The numeric entries of a /proc folder: process ids in /proc (this one included), thread ids in
// /proc/PID/task (none once the process has ended).
std::vector<pid_t> numeric_entries(const std::string& folder) {
  std::vector<pid_t> ids;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(folder.c_str()), ::closedir);
  if (!dir) return ids;
  while (const dirent* entry = ::readdir(dir.get())) {
    char* end = nullptr;
    const long id = std::strtol(entry->d_name, &end, 10);
    if (*end == '\0' && id > 0) ids.push_back(static_cast<pid_t>(id));
  }
  return ids;
}

std::vector<pid_t> all_processes() { return numeric_entries("/proc"); }

}  // namespace

pid_t spawn_job(const JobCommand& command) {
  if (command.argv.empty()) throw std::runtime_error("launch: the command is empty");
  std::map<std::string, std::string> env;  // the environment, with command.env replacing entries
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    env[entry.substr(0, entry.find('='))] = entry;
  }
  for (const std::string& entry : command.env) env[entry.substr(0, entry.find('='))] = entry;
  std::vector<char*> envp;
  for (auto& [name, entry] : env) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = command.argv;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  std::unique_ptr<posix_spawn_file_actions_t, int (*)(posix_spawn_file_actions_t*)> actions_guard(
      &actions, posix_spawn_file_actions_destroy);
  std::unique_ptr<posix_spawnattr_t, int (*)(posix_spawnattr_t*)> attr_guard(&attr, posix_spawnattr_destroy);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, command.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  // A new session; default signal dispositions (the coordinator may ignore SIGPIPE, a job must not).
  sigset_t defaults;
  sigfillset(&defaults);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  if (rc != 0)
    throw std::runtime_error("launch: cannot start " + command.argv[0] + " (log " + command.log_path +
                             "): " + errno_text(rc));
  return pid;
}

std::vector<pid_t> session_processes(pid_t sid) {
  std::vector<pid_t> pids;
  for (pid_t pid : all_processes()) {
    const auto st = read_proc_stat(pid);
    if (st && st->session == sid && st->state != 'Z' && st->state != 'X') pids.push_back(pid);
  }
  return pids;
}

std::vector<std::pair<pid_t, char>> thread_states(pid_t pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task/";
  std::vector<std::pair<pid_t, char>> states;
  for (pid_t tid : numeric_entries(tasks)) {
    if (const auto st = read_stat(tasks + std::to_string(tid) + "/stat")) states.emplace_back(tid, st->state);
  }
  return states;
}

std::vector<pid_t> processes_with_environment_entry(std::string_view entry) {
  std::vector<pid_t> pids;
  for (pid_t pid : all_processes())
    if (pid != ::getpid() && process_has_environment_entry(pid, entry)) pids.push_back(pid);
  return pids;
}

int signal_session(pid_t sid, int signal) {
  int signalled = 0;
  for (pid_t pid : session_processes(sid))
    if (::kill(pid, signal) == 0) ++signalled;
  return signalled;
}

std::optional<int> try_reap(pid_t pid) {
  int status = 0;
  pid_t rc;
  do rc = ::waitpid(pid, &status, WNOHANG);
  while (rc < 0 && errno == EINTR);
  if (rc == 0) return std::nullopt;
  if (rc < 0) return W_EXITCODE(255, 0);  // not our child any more: treat as a failed exit
  return status;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    return "killed by signal " + std::to_string(sig) + " (" + (name ? name : "?") + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

bool process_has_environment_entry(pid_t pid, std::string_view entry) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  if (!in) return false;
  std::string item;
  while (std::getline(in, item, '\0'))
    if (item == entry) return true;
  return false;
}

}  // namespace linea::coordinator
