#include "coordinator/token_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace linea::coordinator {
namespace {

constexpr size_t kMinTokenChars = 16;
constexpr size_t kMaxTokenChars = 1024;

std::runtime_error token_error(const std::string& path, const std::string& what) {
  return std::runtime_error("token file " + path + ": " + what);
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string read_token_file(const std::string& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) throw token_error(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw token_error(path, std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw token_error(path, "expected a regular file");
  if (st.st_uid != ::geteuid())
    throw token_error(path, "expected a file owned by the current user (uid " + std::to_string(::geteuid()) +
                                "), it belongs to uid " + std::to_string(st.st_uid));
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw token_error(path, std::string("group or others may access it (mode ") + mode +
                                "); expected owner-only permissions: chmod 600 " + path);
  }
  std::string text(kMaxTokenChars + 64, '\0');
  const ssize_t n = ::read(fd.get(), text.data(), text.size());
  if (n < 0) throw token_error(path, std::string("cannot read: ") + std::strerror(errno));
  text.resize(static_cast<size_t>(n));
  const size_t begin = text.find_first_not_of(" \t\r\n");
  const size_t end = text.find_last_not_of(" \t\r\n");
  const std::string token = begin == std::string::npos ? "" : text.substr(begin, end - begin + 1);
  if (token.size() < kMinTokenChars || token.size() > kMaxTokenChars)
    throw token_error(path, "expected a token of " + std::to_string(kMinTokenChars) + " to " +
                                std::to_string(kMaxTokenChars) + " characters, found " + std::to_string(token.size()));
  for (char c : token)
    if (c < 0x21 || c > 0x7e) throw token_error(path, "expected printable ASCII without spaces in the token");
  return token;
}

std::string create_token_file(const std::string& path) {
  unsigned char random[32];
  if (::getrandom(random, sizeof random, 0) != static_cast<ssize_t>(sizeof random))
    throw token_error(path, std::string("cannot read random bytes: ") + std::strerror(errno));
  std::string token;
  for (unsigned char b : random) {
    static constexpr char kHex[] = "0123456789abcdef";
    token += kHex[b >> 4];
    token += kHex[b & 15];
  }
  FileDescriptor fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (fd.get() < 0) throw token_error(path, std::string("cannot create: ") + std::strerror(errno));
  const std::string line = token + "\n";
  if (::write(fd.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()) || ::fsync(fd.get()) != 0)
    throw token_error(path, std::string("cannot write: ") + std::strerror(errno));
  return token;
}

bool tokens_equal(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

}  // namespace linea::coordinator
