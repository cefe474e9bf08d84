#include "checkpoint/checkpoint_directory.h"

#include <glog/logging.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <stdexcept>
#include <system_error>

#include "data/atomic_file.h"

namespace linea {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kPrefix = "step-";
constexpr std::string_view kTemporarySuffix = ".tmp";

[[noreturn]] void fail_root(const fs::path& root, std::string_view problem) {
  throw std::runtime_error("checkpoint root '" + root.string() + "': " + std::string(problem));
}

bool is_committed(const fs::path& directory) {
  std::error_code ec;
  return fs::is_regular_file(directory / kCommittedMarkerName, ec);
}

// Entries of an existing root directory (an absent root yields none).
std::vector<fs::directory_entry> root_entries(const fs::path& root) {
  std::error_code ec;
  if (!fs::exists(root, ec)) return {};
  if (!fs::is_directory(root, ec)) fail_root(root, "exists but is not a directory");
  std::vector<fs::directory_entry> entries;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(*it);
  if (ec) fail_root(root, "cannot list: " + ec.message());
  return entries;
}

void remove_directory(const fs::path& directory, std::string_view why) {
  std::error_code ec;
  fs::remove_all(directory, ec);
  if (ec)
    throw std::runtime_error("cannot remove " + std::string(why) + " '" + directory.string() + "': " + ec.message());
}

}  // namespace

std::string checkpoint_directory_name(int64_t step) {
  if (step < 0) throw std::invalid_argument("checkpoint step must be >= 0, got " + std::to_string(step));
  char name[32];
  std::snprintf(name, sizeof name, "step-%09lld", static_cast<long long>(step));
  return name;
}

std::optional<int64_t> parse_checkpoint_directory_name(std::string_view name) {
  if (!name.starts_with(kPrefix)) return std::nullopt;
  const std::string_view digits = name.substr(kPrefix.size());
  if (digits.size() < 9 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  int64_t step = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  if (checkpoint_directory_name(step) != name) return std::nullopt;  // one spelling per step
  return step;
}

std::vector<CommittedCheckpoint> list_committed_checkpoints(const fs::path& root) {
  std::vector<CommittedCheckpoint> committed;
  for (const fs::directory_entry& entry : root_entries(root)) {
    const std::optional<int64_t> step = parse_checkpoint_directory_name(entry.path().filename().string());
    std::error_code ec;
    if (step && entry.is_directory(ec) && is_committed(entry.path())) committed.push_back({*step, entry.path()});
  }
  std::sort(committed.begin(), committed.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return committed;
}

fs::path temporary_checkpoint_directory(const fs::path& root, int64_t step) {
  return root / (checkpoint_directory_name(step) + std::string(kTemporarySuffix));
}

fs::path begin_checkpoint(const fs::path& root, int64_t step) {
  const std::string name = checkpoint_directory_name(step);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) fail_root(root, "cannot create it: " + ec.message());
  for (const fs::directory_entry& entry : root_entries(root)) {
    const std::string entry_name = entry.path().filename().string();
    const bool temporary = entry_name.ends_with(kTemporarySuffix) &&
                           parse_checkpoint_directory_name(
                               std::string_view(entry_name).substr(0, entry_name.size() - kTemporarySuffix.size()));
    const bool uncommitted = parse_checkpoint_directory_name(entry_name) && !is_committed(entry.path());
    if ((temporary || uncommitted) && entry.is_directory(ec)) {
      LOG(WARNING) << "checkpoint: removing uncommitted leftover '" << entry.path().string() << "'";
      remove_directory(entry.path(), "uncommitted checkpoint");
    }
  }
  if (is_committed(root / name)) {
    fail_root(root, "step " + std::to_string(step) + " is already committed in '" + (root / name).string() +
                        "'; a committed checkpoint is never overwritten");
  }
  fs::path temporary = temporary_checkpoint_directory(root, step);
  fs::create_directory(temporary, ec);
  if (ec) fail_root(root, "cannot create '" + temporary.string() + "': " + ec.message());
  return temporary;
}

fs::path commit_checkpoint(const fs::path& temporary_directory, std::string_view marker) {
  const std::string name = temporary_directory.filename().string();
  if (!name.ends_with(kTemporarySuffix) ||
      !parse_checkpoint_directory_name(std::string_view(name).substr(0, name.size() - kTemporarySuffix.size()))) {
    throw std::invalid_argument("commit_checkpoint: '" + temporary_directory.string() +
                                "' is not a step-NNNNNNNNN.tmp directory");
  }
  const fs::path root = temporary_directory.parent_path();
  const fs::path final_directory = root / name.substr(0, name.size() - kTemporarySuffix.size());
  data::fsync_path(temporary_directory);
  std::error_code ec;
  fs::rename(temporary_directory, final_directory, ec);
  if (ec) {
    throw std::runtime_error("cannot rename '" + temporary_directory.string() + "' to '" + final_directory.string() +
                             "': " + ec.message());
  }
  data::fsync_path(root);
  data::write_file_atomically(final_directory / kCommittedMarkerName, marker);
  return final_directory;
}

fs::path set_aside_damaged_checkpoint(const fs::path& directory) {
  fs::path damaged = directory;
  damaged += ".damaged";
  remove_directory(damaged, "an older damaged checkpoint");
  std::error_code ec;
  fs::rename(directory, damaged, ec);
  if (ec) {
    throw std::runtime_error("cannot rename damaged checkpoint '" + directory.string() + "' to '" + damaged.string() +
                             "': " + ec.message());
  }
  data::fsync_path(directory.parent_path());
  return damaged;
}

std::vector<int64_t> prune_checkpoints(const fs::path& root, int keep_last) {
  if (keep_last < 1) throw std::invalid_argument("keep_last must be >= 1, got " + std::to_string(keep_last));
  const std::vector<CommittedCheckpoint> committed = list_committed_checkpoints(root);
  std::vector<int64_t> deleted;
  for (size_t i = 0; i + keep_last < committed.size(); ++i) {
    const CommittedCheckpoint& old = committed[i];
    // Housekeeping: a failure here must not turn the save that was just committed into an error.
    try {
      std::error_code ec;
      if (!fs::remove(old.directory / kCommittedMarkerName, ec) || ec) {
        throw std::runtime_error("cannot remove its marker: " + ec.message());
      }
      data::fsync_path(old.directory);
      remove_directory(old.directory, "old checkpoint");
      deleted.push_back(old.step);
    } catch (const std::exception& e) {
      LOG(WARNING) << "checkpoint: could not delete old checkpoint '" << old.directory.string() << "': " << e.what();
    }
  }
  // Damaged checkpoints set aside before the oldest one kept go the same way.
  if (committed.size() <= static_cast<size_t>(keep_last)) return deleted;
  const int64_t oldest_kept = committed[committed.size() - static_cast<size_t>(keep_last)].step;
  constexpr std::string_view kDamagedSuffix = ".damaged";
  for (const fs::directory_entry& entry : root_entries(root)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(kDamagedSuffix)) continue;
    const auto step =
        parse_checkpoint_directory_name(std::string_view(name).substr(0, name.size() - kDamagedSuffix.size()));
    if (!step || *step >= oldest_kept) continue;
    try {
      remove_directory(entry.path(), "damaged checkpoint");
    } catch (const std::exception& e) {
      LOG(WARNING) << "checkpoint: could not delete damaged checkpoint '" << entry.path().string() << "': " << e.what();
    }
  }
  return deleted;
}

}  // namespace linea
