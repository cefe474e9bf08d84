// Checkpoints: the training state as one committed directory `step-NNNNNNNNN/` holding
//   rank-RRRRR.h5  the tensors, one dataset each, tagged with the attributes `full_shape` and
//                  `offset` (the slice of the full logical tensor it holds: for now one rank
//                  writes every tensor whole);
//   manifest.json  format version, step, tokens seen, resolved config text, data-loader position,
//                  RNG states, layout (tp, dp, world), and every dataset (file, dtype, shape,
//                  slice, byte count, CRC32 of its raw bytes);
//   COMMITTED      the marker of checkpoint_directory.h, holding the manifest's CRC32 and size.
// save_checkpoint writes through the commit protocol of checkpoint_directory.h and then keeps
// the newest `keep_last`. load_checkpoint verifies everything (marker, manifest, each dataset's
// shape, dtype, slice and checksum) and throws std::runtime_error naming the file and the problem;
// load_latest_checkpoint logs such problems as warnings and falls back to older checkpoints.
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_directory.h"
#include "kernels/tensor.h"

namespace linea {

struct CheckpointLayout {
  int64_t tp = 1;
  int64_t dp = 1;
  int64_t world = 1;  // = tp × dp
  bool operator==(const CheckpointLayout&) const = default;
};

struct CheckpointState {
  int64_t step = 0;
  int64_t tokens = 0;                                       // tokens seen so far
  std::string config;                                       // the resolved run configuration (TOML text)
  nlohmann::json data_position = nlohmann::json::object();  // the data loader's position, as it describes it
  nlohmann::json rng_states = nlohmann::json::object();     // every RNG's state, named by the caller
  nlohmann::json trainer_state = nlohmann::json::object();  // the trainer's scalars (optimizer kind, step ...)
  CheckpointLayout layout;
  std::vector<std::pair<std::string, Tensor>> tensors;  // unique names; loaded back in this order
};

inline constexpr int64_t kCheckpointFormatVersion = 1;

// Throws std::invalid_argument unless `state` can be saved (steps, tokens and layout in range,
// data_position, rng_states and trainer_state JSON objects, tensors defined, names unique and usable as HDF5
// paths) and keep_last >= 1.
void validate_checkpoint_state(const CheckpointState& state, int keep_last);

// Writes `state` as checkpoint `state.step` under `root`, commits it, then deletes all but the
// newest `keep_last` committed checkpoints. Tensors may live on any device. Returns the committed
// directory. On failure nothing committed is touched (the partial `.tmp` directory is removed by
// the next save). If step N is already committed, a sound checkpoint is kept and this throws
// std::runtime_error; a damaged one is set aside as `step-N.damaged/` and replaced.
std::filesystem::path save_checkpoint(const std::filesystem::path& root, const CheckpointState& state, int keep_last);

// Reads and verifies one committed checkpoint directory; tensors come back as CPU tensors with
// their saved dtype and bit pattern.
CheckpointState load_checkpoint(const std::filesystem::path& directory);

struct CheckpointLoadOptions {
  bool strict = false;  // throw (listing every problem) instead of returning nullopt
  // Receives one line per checkpoint that was skipped (also logged as a warning).
  std::vector<std::string>* problems = nullptr;
};

// The newest committed checkpoint under `root` that verifies; nullopt when there is none.
std::optional<CheckpointState> load_latest_checkpoint(const std::filesystem::path& root,
                                                      const CheckpointLoadOptions& options = {});

}  // namespace linea
