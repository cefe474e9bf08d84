// RunDirectoryLock: one `linea train` at a time in a run directory. The lock is flock(LOCK_EX) on
// RUN_DIR/lock, held while the object lives; the kernel releases it when the process dies in any
// way (SIGKILL included), so a crashed run never blocks its own resume. The holder writes
// "pid <pid> host <host>" into the file; a second run finds the lock taken and is refused with an
// error naming that pid and host. The file descriptor is close-on-exec, so a child process does
// not inherit the lock. Under MPI rank 0 alone takes it (worker/trainer.cpp), before any rank writes.
#pragma once
#include <filesystem>

namespace linea {

class RunDirectoryLock {
 public:
  // Takes the lock of `run_dir` (which must exist) or throws std::runtime_error naming the holder.
  explicit RunDirectoryLock(const std::filesystem::path& run_dir);
  ~RunDirectoryLock();
  RunDirectoryLock(const RunDirectoryLock&) = delete;
  RunDirectoryLock& operator=(const RunDirectoryLock&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace linea
