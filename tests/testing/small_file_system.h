// A small file system for the fault tests' full disks: a tmpfs of `bytes` mounted on a directory
// (created if needed) and unmounted, lazily, when the object goes. Mounting needs root (or
// CAP_SYS_ADMIN); mounted() says whether it worked, and why_not() why it did not. fill() appends
// zeros to the file `filler` on it until no byte is left (throwing std::runtime_error when that
// file cannot be made or opened); called again, it takes whatever room was freed since (a pruned
// checkpoint). make_room() removes that file again.
#pragma once
#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace linea::testing {

class SmallFileSystem {
 public:
  SmallFileSystem(const std::filesystem::path& where, int64_t bytes) : where_(where) {
    std::filesystem::create_directories(where);
    const std::string options = "size=" + std::to_string(bytes);
    if (::mount("tmpfs", where.c_str(), "tmpfs", 0, options.c_str()) == 0) {
      mounted_ = true;
    } else {
      why_not_ = "mount -t tmpfs -o " + options + " " + where.string() + ": " + std::strerror(errno);
    }
  }
  ~SmallFileSystem() {
    if (mounted_) ::umount2(where_.c_str(), MNT_DETACH);
  }
  SmallFileSystem(const SmallFileSystem&) = delete;
  SmallFileSystem& operator=(const SmallFileSystem&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& why_not() const { return why_not_; }

  void fill() const {
    const int fd = ::open(filler().c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) throw std::runtime_error("cannot create or open " + filler().string() + ": " + std::strerror(errno));
    const std::vector<char> zeros(1 << 16, 0);
    while (::write(fd, zeros.data(), zeros.size()) > 0) {
    }
    ::close(fd);
  }
  void make_room() const { std::filesystem::remove(filler()); }

 private:
  std::filesystem::path filler() const { return where_ / "filler"; }

  std::filesystem::path where_;
  bool mounted_ = false;
  std::string why_not_;
};

}  // namespace linea::testing
