// Journal: the coordinator's durable state, an append-only file DIR/journal.jsonl of JSON lines, one
// RunTable event each. append() returns only after the line is on disk (fdatasync), so anything the
// coordinator has acted on survives a kill. Opening takes an exclusive lock (DIR/lock): a second
// coordinator on the same directory is refused. A last line cut short by a crash during append is
// dropped (and cut from the file); any other unreadable line is an error naming file and line, since
// skipping it could lose or repeat a run. compact() atomically replaces the file with a shorter
// equivalent (a snapshot): written to journal.jsonl.tmp, fsynced, renamed over, directory fsynced.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace linea::coordinator {

class Journal {
 public:
  // Creates DIR (mode 0700) if needed, locks it and reads the existing events.
  explicit Journal(const std::string& state_dir);
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;
  ~Journal();

  // The events found when the journal was opened, in order.
  const std::vector<nlohmann::json>& replayed() const { return replayed_; }
  // True when a cut-short last line was dropped at open.
  bool dropped_partial_line() const { return dropped_partial_line_; }

  // Throws std::runtime_error when the line cannot be written and synced.
  void append(const nlohmann::json& event);
  void compact(const std::vector<nlohmann::json>& events);

  size_t lines() const { return lines_; }
  const std::string& path() const { return path_; }

 private:
  void open_for_append();

  std::string dir_;
  std::string path_;
  int lock_fd_ = -1;
  int fd_ = -1;
  size_t lines_ = 0;
  bool dropped_partial_line_ = false;
  std::vector<nlohmann::json> replayed_;
};

}  // namespace linea::coordinator
