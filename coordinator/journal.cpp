#include "coordinator/journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "coordinator/protocol.h"
#include "data/atomic_file.h"

namespace linea::coordinator {
namespace {

std::runtime_error io_error(const std::string& what, const std::string& path) {
  return std::runtime_error(what + " " + path + ": " + std::strerror(errno));
}

void write_all(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw io_error("cannot write", path);
    done += static_cast<size_t>(n);
  }
}

}  // namespace

Journal::Journal(const std::string& state_dir) : dir_(state_dir), path_(state_dir + "/journal.jsonl") {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw std::runtime_error("cannot create state directory " + dir_ + ": " + ec.message());
  const std::string lock_path = dir_ + "/lock";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) throw io_error("cannot open", lock_path);
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
    throw std::runtime_error("state directory " + dir_ + " is in use by another coordinator (" + lock_path +
                             " is locked)");
  }

  std::ifstream in(path_, std::ios::binary);
  std::stringstream text;
  if (in) text << in.rdbuf();
  const std::string content = text.str();
  size_t begin = 0;
  size_t line_number = 0;
  while (begin < content.size()) {
    const size_t end = content.find('\n', begin);
    ++line_number;
    if (end == std::string::npos) {  // cut short by a crash during append: never acknowledged
      dropped_partial_line_ = true;
      break;
    }
    nlohmann::json event = nlohmann::json::parse(content.begin() + static_cast<std::ptrdiff_t>(begin),
                                                 content.begin() + static_cast<std::ptrdiff_t>(end), nullptr, false);
    if (event.is_discarded() || !event.is_object())
      throw std::runtime_error(path_ + ":" + std::to_string(line_number) +
                               ": expected one JSON event per line; the journal is damaged (move it away to start "
                               "afresh, or repair the line)");
    replayed_.push_back(std::move(event));
    begin = end + 1;
  }
  lines_ = replayed_.size();
  if (dropped_partial_line_) {
    if (::truncate(path_.c_str(), static_cast<off_t>(begin)) != 0) throw io_error("cannot truncate", path_);
  }
  open_for_append();
}

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void Journal::open_for_append() {
  if (fd_ >= 0) ::close(fd_);
  const bool existed = std::filesystem::exists(path_);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) throw io_error("cannot open", path_);
  if (!existed) data::fsync_path(dir_);
}

void Journal::append(const nlohmann::json& event) {
  write_all(fd_, encode_message(event), path_);
  if (::fdatasync(fd_) != 0) throw io_error("cannot sync", path_);
  ++lines_;
}

void Journal::compact(const std::vector<nlohmann::json>& events) {
  std::string content;
  for (const auto& e : events) content += encode_message(e);
  data::write_file_atomically(path_, content, 0600);
  lines_ = events.size();
  open_for_append();
}

}  // namespace linea::coordinator
