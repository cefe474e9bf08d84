// AsyncCheckpointWriter: saves checkpoints on a background thread while training goes on.
//
// save() copies every tensor into host buffers the writer owns (so the caller may change its
// parameters as soon as save() returns) and hands the copy to a background thread that runs
// save_checkpoint(). One write at a time: save() first waits for the previous write to finish.
// The buffers are kept and reused by the next save() when the tensors have the same names,
// shapes and dtypes. A failed write does not throw: it is logged and reported by last_error().
// Call the methods from one thread; the destructor waits for a write in flight.
#pragma once
#include <atomic>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "checkpoint/checkpoint.h"

namespace linea {

struct CheckpointWriteStats {
  int64_t step = -1;
  int64_t bytes = 0;      // tensor bytes in the checkpoint
  double blocked_ms = 0;  // time save() held its caller (waiting for the previous write + copying)
  double waiting_ms = 0;  // the part of blocked_ms spent waiting for the previous write
  double write_ms = 0;    // background time: HDF5, checksums, fsync, commit, pruning
};

class AsyncCheckpointWriter {
 public:
  AsyncCheckpointWriter(std::filesystem::path root, int keep_last);
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;
  ~AsyncCheckpointWriter();

  // Validates `state` (throwing std::invalid_argument at once), snapshots it, starts the write.
  void save(const CheckpointState& state);
  // Blocks until no write is in flight.
  void wait();
  bool is_busy() const { return busy_.load(); }
  // The error of the most recent finished write; nullopt when it succeeded (or none finished).
  std::optional<std::string> last_error() const;
  // Timings of the most recent finished write.
  CheckpointWriteStats last_stats() const;

 private:
  void snapshot(const CheckpointState& state);
  void write(CheckpointWriteStats stats);

  const std::filesystem::path root_;
  const int keep_last_;
  CheckpointState snapshot_;  // owned by the background thread while busy
  std::thread thread_;
  std::atomic<bool> busy_{false};
  mutable std::mutex mutex_;  // guards the two fields below
  std::optional<std::string> last_error_;
  CheckpointWriteStats last_stats_;
};

}  // namespace linea
