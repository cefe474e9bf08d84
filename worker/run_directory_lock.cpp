#include "worker/run_directory_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace linea {

namespace {

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "an unknown host";
  return name;
}

// The holder's "pid N host H" as it wrote it (an empty file while it is still writing).
std::string read_holder(int fd) {
  char text[512] = {};
  const ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
  std::string holder = n > 0 ? std::string(text, static_cast<size_t>(n)) : "";
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
  return holder.empty() ? "a process that has not said its pid yet" : holder;
}

}  // namespace

RunDirectoryLock::RunDirectoryLock(const std::filesystem::path& run_dir) : path_(run_dir / "lock") {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw std::runtime_error(path_.string() + ": cannot open the run directory's lock: " + std::strerror(errno));
  }
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = error == EWOULDBLOCK ? read_holder(fd_) : "";
    ::close(fd_);
    fd_ = -1;
    if (error != EWOULDBLOCK) {
      throw std::runtime_error(path_.string() + ": cannot lock the run directory: " + std::strerror(error));
    }
    throw std::runtime_error(run_dir.string() + " is in use by another linea train (" + holder + "; lock " +
                             path_.string() +
                             "): two runs in one directory would overwrite each other's records; wait for it to "
                             "end, stop it, or choose another run.name or run.dir");
  }
  const std::string holder = "pid " + std::to_string(getpid()) + " host " + host_name() + "\n";
  if (ftruncate(fd_, 0) != 0 || pwrite(fd_, holder.data(), holder.size(), 0) != static_cast<ssize_t>(holder.size())) {
    const int error = errno;
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error(path_.string() + ": cannot write the run directory's lock: " + std::strerror(error));
  }
}

RunDirectoryLock::~RunDirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace linea
