// Checkpoints: the training state as one committed directory `step-NNNNNNNNN/` holding
//   rank-RRRRR.h5  one file per rank that saved: the tensors it held, one dataset each, tagged
//                  with the attributes `full_shape` and `offset` (the block of the full logical
//                  tensor it holds: a whole tensor, or one rank's slice of it, checkpoint/tensor_block.h);
//   manifest.json  format version, step, tokens seen, resolved config text, data-loader position,
//                  RNG states, layout (tp, dp, world), and every dataset (file, name, dtype, shape,
//                  full_shape, offset, byte count, CRC32 of its raw bytes);
//   COMMITTED      the marker of checkpoint_directory.h, holding the manifest's CRC32 and size.
// The datasets of one name, over all files, must tile its full tensor exactly (no gap, no overlap);
// the writer checks this before committing and the reader before reading. So a checkpoint saved
// under one layout of ranks can be read under any other: each reader asks for the blocks it needs
// and they are assembled from the stored ones ("resharding").
//
// One writer: save_checkpoint() writes through the commit protocol of checkpoint_directory.h and
// then keeps the newest `keep_last`. Several writers (one per rank, a shared file system):
// rank 0 begin_checkpoint_save(); every rank write_checkpoint_part(); once all have finished,
// rank 0 commit_checkpoint_save() (async_checkpoint_writer.h runs this protocol over a
// Communicator). load_checkpoint / CheckpointReader verify everything they read (marker,
// manifest, each dataset's shape, dtype, block and checksum) and throw std::runtime_error naming the
// file and the problem; load_latest_checkpoint logs such problems as warnings and falls back to
// older checkpoints.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_directory.h"
#include "checkpoint/tensor_block.h"
#include "kernels/tensor.h"

namespace linea {

struct CheckpointLayout {
  int64_t tp = 1;
  int64_t dp = 1;
  int64_t world = 1;  // = tp × dp
  bool operator==(const CheckpointLayout&) const = default;
};

// One tensor of a checkpoint, or the block of it that one rank holds: `data` is the block of the
// full logical tensor of shape `full_shape` that starts at `offset`. When saving, empty full_shape
// and offset mean that data is the whole tensor; loaded tensors always have both.
struct CheckpointTensor {
  std::string name;
  Tensor data;
  Shape full_shape;
  std::vector<int64_t> offset;

  CheckpointTensor(std::string name, Tensor data, Shape full_shape = {}, std::vector<int64_t> offset = {})
      : name(std::move(name)), data(std::move(data)), full_shape(std::move(full_shape)), offset(std::move(offset)) {}
  bool whole() const { return full_shape.empty() && offset.empty(); }
  // The block this tensor is, in its full tensor's coordinates.
  TensorBlock block() const;
  Shape full() const { return whole() ? data.shape() : full_shape; }
};

struct CheckpointState {
  int64_t step = 0;
  int64_t tokens = 0;                                       // tokens seen so far
  std::string config;                                       // the resolved run configuration (TOML text)
  nlohmann::json data_position = nlohmann::json::object();  // the data loader's position, as it describes it
  nlohmann::json rng_states = nlohmann::json::object();     // every RNG's state, named by the caller
  nlohmann::json trainer_state = nlohmann::json::object();  // the trainer's scalars (optimizer kind, step ...)
  CheckpointLayout layout;
  std::vector<CheckpointTensor> tensors;  // unique names; loaded back in this order (whole)
};

inline constexpr int64_t kCheckpointFormatVersion = 1;

// Throws std::invalid_argument unless `state` can be saved (steps, tokens and layout in range,
// data_position, rng_states and trainer_state JSON objects, tensors defined, names unique and usable as HDF5
// paths, blocks inside their full shapes) and keep_last >= 1.
void validate_checkpoint_state(const CheckpointState& state, int keep_last);

// Writes `state` as checkpoint `state.step` under `root`, commits it, then deletes all but the
// newest `keep_last` committed checkpoints. Tensors may live on any device. Returns the committed
// directory. On failure nothing committed is touched (the partial `.tmp` directory is removed by
// the next save). If step N is already committed, a sound checkpoint is kept and this throws
// std::runtime_error; a damaged one is set aside as `step-N.damaged/` and replaced.
std::filesystem::path save_checkpoint(const std::filesystem::path& root, const CheckpointState& state, int keep_last);

// ---- several writers ------------------------------------------------------------------------
// Rank 0 alone: prepares the save of `step` (a damaged committed step-N is set aside, as
// save_checkpoint does) and returns the empty temporary directory every rank writes into.
std::filesystem::path begin_checkpoint_save(const std::filesystem::path& root, int64_t step);
// Every rank: validates its `state` and writes its tensors to `temporary`/rank-RRRRR.h5, with their
// manifest entries beside it in rank-RRRRR.json; both are fsynced. The state's scalars are not
// written here (rank 0 passes them to commit_checkpoint_save).
void write_checkpoint_part(const std::filesystem::path& temporary, const CheckpointState& state, int rank);
// Rank 0, after ranks 0 … world−1 have all written their parts: checks that the parts tile every
// tensor, writes the manifest (the scalars and layout of `state`; its tensors are not used),
// commits, and keeps the newest `keep_last`. Throws std::runtime_error naming the problem (the
// temporary directory is then left for the next save to remove).
std::filesystem::path commit_checkpoint_save(const std::filesystem::path& temporary, const CheckpointState& state,
                                             int world, int keep_last);

// ---- reading ---------------------------------------------------------------------------------
// A committed checkpoint opened for reading blocks of its tensors. The constructor verifies the
// marker and the manifest, and that each tensor's datasets tile it; each dataset is verified
// (shape, dtype, attributes, checksum) when it is read.
class CheckpointReader {
 public:
  explicit CheckpointReader(const std::filesystem::path& directory);
  CheckpointReader(CheckpointReader&&) noexcept;
  CheckpointReader& operator=(CheckpointReader&&) noexcept;
  ~CheckpointReader();

  const std::filesystem::path& directory() const;
  // Everything but the tensors.
  const CheckpointState& info() const;
  std::vector<std::string> tensor_names() const;  // in the order of the manifest
  bool contains(const std::string& name) const;
  Shape full_shape(const std::string& name) const;
  DType dtype(const std::string& name) const;

  // Fills `out` (a contiguous CPU tensor of the stored dtype) with the block of tensor `name` that
  // starts at `offset` and has out's shape, from every stored dataset it overlaps.
  void read(const std::string& name, const std::vector<int64_t>& offset, const Tensor& out);
  // The whole tensor.
  Tensor read(const std::string& name);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Reads and verifies one committed checkpoint directory; tensors come back whole, as CPU tensors
// with their saved dtype and bit pattern (assembled from the blocks of every rank's file).
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
