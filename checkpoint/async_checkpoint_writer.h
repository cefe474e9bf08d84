// AsyncCheckpointWriter: saves checkpoints on a background thread while training goes on.
//
// save() copies every tensor into host buffers the writer owns (so the caller may change its
// parameters as soon as save() returns) and hands the copy to a background thread that runs
// save_checkpoint(). One write at a time: save() first waits for the previous write to finish.
// The buffers are kept and reused by the next save() when the tensors have the same names,
// shapes and dtypes. A failed write does not throw: it is reported by last_error() and
// take_outcomes() (the caller tells the user; the writer logs nothing itself).
// Call the methods from one thread; the destructor waits for a write in flight.
//
// Several ranks (a `group` Communicator of more than one rank, a file system they all see): each
// rank saves the tensors it holds (blocks of the full tensors) with checkpoint.h's several-writer
// protocol, and save(), poll() and wait() become collective over the group — every rank calls
// them at the same points of training. save(): rank 0 prepares the directory, then every rank
// snapshots and starts writing its part. poll(), once per step: when every rank has finished, rank
// 0 writes the manifest and commits. An error on any rank is reported by last_error() on every
// rank, and nothing is committed. Only the calling thread communicates: the background thread
// just writes files (MPI may be used by one thread at a time). A write still in flight when the
// writer is destroyed is waited for but not committed (the next save removes it).
#pragma once
#include <atomic>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace linea {

class Communicator;

struct CheckpointWriteStats {
  int64_t step = -1;
  int64_t bytes = 0;      // tensor bytes in the checkpoint
  double blocked_ms = 0;  // time save() held its caller (waiting for the previous write + copying)
  double waiting_ms = 0;  // the part of blocked_ms spent waiting for the previous write
  double write_ms = 0;    // background time: HDF5, checksums, fsync, commit, pruning
};

// How one save() ended: committed (no error) or failed (and nothing of it committed).
struct CheckpointOutcome {
  int64_t step = -1;
  std::optional<std::string> error;
};

class AsyncCheckpointWriter {
 public:
  // group: the ranks that save together (nullptr, or a group of one: this process alone).
  AsyncCheckpointWriter(std::filesystem::path root, int keep_last, Communicator* group = nullptr);
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;
  ~AsyncCheckpointWriter();

  // Validates `state` (throwing std::invalid_argument at once), waits for the previous write,
  // snapshots `state`, starts the write. Collective over the group.
  void save(const CheckpointState& state);
  // Finishes (commits) a write that every rank has completed; returns true when none is in flight
  // any more. Never blocks on the disk. Collective over the group (a no-op alone).
  bool poll();
  // Blocks until no write is in flight, then finishes it. Collective over the group.
  void wait();
  bool is_busy() const { return busy_.load(); }
  // The error of the most recent finished write; nullopt when it succeeded (or none finished).
  std::optional<std::string> last_error() const;
  // Timings of the most recent finished write.
  CheckpointWriteStats last_stats() const;
  // The outcomes of the saves that ended since the last call, oldest first. With several ranks a
  // save ends when poll() or wait() finishes it, with the outcome every rank agreed on, so every
  // rank takes the same outcomes at the same point.
  std::vector<CheckpointOutcome> take_outcomes();

 private:
  bool several() const;
  void snapshot(const CheckpointState& state);
  void write(CheckpointWriteStats stats);
  void join();
  // Several ranks: agrees on the outcome of the write every rank has finished; rank 0 commits.
  void finish();
  void record_error(int64_t step, std::string error);  // a save that failed before it started

  const std::filesystem::path root_;
  const int keep_last_;
  Communicator* group_;
  std::filesystem::path temporary_;  // several ranks: the directory of the write in flight
  bool pending_ = false;             // several ranks: a write not finished yet (the same on every rank)
  CheckpointState snapshot_;         // owned by the background thread while busy
  std::thread thread_;
  std::atomic<bool> busy_{false};
  mutable std::mutex mutex_;  // guards the three fields below
  std::optional<std::string> last_error_;
  CheckpointWriteStats last_stats_;
  std::vector<CheckpointOutcome> outcomes_;
};

}  // namespace linea
