// The checkpoint root on disk and its commit protocol.
//
// A checkpoint root holds one directory per checkpoint, `step-NNNNNNNNN/` (the step, at least 9
// digits). It is written as `step-N.tmp/`, made durable (fsync of its files by the writer, then of
// the directory), renamed to `step-N/` (the root is fsynced), and only then marked with a
// `COMMITTED` file, itself written atomically and durably. A directory without `COMMITTED` is not
// a checkpoint: it is ignored when listing and removed by the next save. Older checkpoints are
// deleted after a newer one is committed, marker first, so that a crash mid-deletion leaves an
// uncommitted directory rather than a committed, half-deleted one.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace linea {

struct CommittedCheckpoint {
  int64_t step = 0;
  std::filesystem::path directory;
};

std::string checkpoint_directory_name(int64_t step);  // "step-000000123"
// The step a directory name stands for; nullopt for anything else (".tmp" directories included).
std::optional<int64_t> parse_checkpoint_directory_name(std::string_view name);

// Committed checkpoints under `root`, oldest first. A missing root has none; a root that is not a
// directory throws std::runtime_error.
std::vector<CommittedCheckpoint> list_committed_checkpoints(const std::filesystem::path& root);

// Where a save of `step` is written before it is committed: `root`/step-N.tmp.
std::filesystem::path temporary_checkpoint_directory(const std::filesystem::path& root, int64_t step);

// Prepares a save of `step`: creates `root` if needed, removes every uncommitted leftover
// (`*.tmp` directories and step directories without `COMMITTED`) and returns a fresh, empty
// `step-N.tmp/`. Throws if `step` is already committed (a committed checkpoint is never replaced).
std::filesystem::path begin_checkpoint(const std::filesystem::path& root, int64_t step);

// Commits a fully written and fsynced `step-N.tmp/`: fsync it, rename it to `step-N/`, fsync the
// root, write `COMMITTED` holding `marker` (its content is the checkpoint format's business).
// Returns the committed directory.
std::filesystem::path commit_checkpoint(const std::filesystem::path& temporary_directory, std::string_view marker);

// Renames a committed checkpoint that failed verification to `step-N.damaged/` (replacing an
// older one of that name): it stops counting as committed, stays for inspection, and step N can
// be saved again. Returns the new path.
std::filesystem::path set_aside_damaged_checkpoint(const std::filesystem::path& directory);

// Deletes all but the newest `keep_last` committed checkpoints, and the damaged ones set aside
// (`step-N.damaged/`) older than the oldest checkpoint kept; returns the committed steps deleted.
std::vector<int64_t> prune_checkpoints(const std::filesystem::path& root, int keep_last);

inline constexpr const char* kCommittedMarkerName = "COMMITTED";

}  // namespace linea
