#include "worker/training_checkpoint.h"

#include <stdexcept>
#include <vector>

#include "model/routing.h"
#include "parallel/error_agreement.h"

namespace linea {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kModelPrefix = "model/";
constexpr std::string_view kOptimizerPrefix = "optimizer/";

// The blocks a rank holds, named as in checkpoints.
std::vector<CheckpointTensor> held_blocks(const DistributedOptimizer& optimizer) {
  std::vector<CheckpointTensor> blocks;
  for (CheckpointTensor& w : optimizer.held_weights()) {
    w.name.insert(0, kModelPrefix);
    blocks.push_back(std::move(w));
  }
  for (CheckpointTensor& s : optimizer.held_state()) {
    s.name.insert(0, kOptimizerPrefix);
    blocks.push_back(std::move(s));
  }
  return blocks;
}

// The committed checkpoints' steps as rank 0 sees them, newest first (the same list on every rank).
std::vector<int64_t> committed_steps(const fs::path& root, Communicator& world) {
  std::vector<int64_t> steps;
  if (world.rank() == 0) {
    for (const CommittedCheckpoint& c : list_committed_checkpoints(root)) steps.insert(steps.begin(), c.step);
  }
  Tensor count = Tensor::empty({1}, DType::i64);
  count.data<int64_t>()[0] = static_cast<int64_t>(steps.size());
  world.broadcast(count, 0);
  steps.resize(static_cast<size_t>(count.data<int64_t>()[0]));
  if (!steps.empty()) {
    Tensor list = Tensor::view(steps.data(), {static_cast<int64_t>(steps.size())}, DType::i64);
    world.broadcast(list, 0);
  }
  return steps;
}

// Reads block b into its tensor, through a host copy when that tensor lives on a GPU.
void read_block(CheckpointReader& reader, const CheckpointTensor& b) {
  if (b.data.device() == Device::cpu) return reader.read(b.name, b.offset, b.data);
  Tensor host = Tensor::empty(b.data.shape(), b.data.dtype());
  reader.read(b.name, b.offset, host);
  Tensor device = b.data;
  device.copy_from(host);
}

// Throws std::runtime_error unless the checkpoint holds every block this rank needs, with the
// optimizer kind, full shapes and dtypes of this run; routing parameters may be absent when
// resume_unrouted (returns whether some are).
bool check_fits(const CheckpointReader& reader, const DistributedOptimizer& optimizer,
                const std::vector<CheckpointTensor>& blocks, bool resume_unrouted) {
  const std::string where = reader.directory().string();
  const nlohmann::json& trainer = reader.info().trainer_state;
  const std::string kind(optimizer_kind_name(optimizer.kind()));
  if (!trainer.contains("optimizer_kind") || trainer["optimizer_kind"] != kind) {
    throw std::runtime_error(where + ": written by optimizer " +
                             (trainer.contains("optimizer_kind") ? trainer["optimizer_kind"].dump() : "(none)") +
                             ", this run uses \"" + kind + "\" (was optimizer.kind changed?)");
  }
  if (!trainer.contains("optimizer_step") || !trainer["optimizer_step"].is_number_integer() ||
      trainer["optimizer_step"].get<int64_t>() < 0) {
    throw std::runtime_error(where + ": trainer_state: expected optimizer_step, an integer >= 0");
  }
  bool unrouted = false;
  for (const CheckpointTensor& b : blocks) {
    if (!reader.contains(b.name) && is_routing_parameter(b.name)) {
      if (resume_unrouted) {
        unrouted = true;
        continue;
      }
      throw std::runtime_error(where + ": has no tensor '" + b.name +
                               "': it was written without this model.routing; set model.routing.resume_unrouted = "
                               "true to start the routing parameters at zero");
    }
    if (!reader.contains(b.name)) {
      throw std::runtime_error(where + ": has no tensor '" + b.name + "' (was the model config changed?)");
    }
    if (reader.full_shape(b.name) != b.full_shape || reader.dtype(b.name) != b.data.dtype()) {
      throw std::runtime_error(where + ": tensor '" + b.name + "' is " + std::string(dtype_name(reader.dtype(b.name))) +
                               shape_string(reader.full_shape(b.name)) + ", expected " +
                               std::string(dtype_name(b.data.dtype())) + shape_string(b.full_shape) +
                               " (was the model config changed?)");
    }
  }
  return unrouted;
}

}  // namespace

CheckpointState training_checkpoint_part(const RunConfig& config, int64_t step, int64_t tokens,
                                         const DistributedOptimizer& optimizer, const data::TrainingBatches& batches,
                                         const CheckpointLayout& layout) {
  CheckpointState s;
  s.step = step;
  s.tokens = tokens;
  s.config = config.resolved;
  s.data_position = batches.position();
  s.trainer_state = {{"optimizer_kind", optimizer_kind_name(optimizer.kind())},
                     {"optimizer_step", optimizer.step_count()}};
  s.layout = layout;
  for (CheckpointTensor& w : optimizer.owned_weights()) {
    w.name.insert(0, kModelPrefix);
    s.tensors.push_back(std::move(w));
  }
  for (CheckpointTensor& t : optimizer.owned_state()) {
    t.name.insert(0, kOptimizerPrefix);
    s.tensors.push_back(std::move(t));
  }
  return s;
}

ResumeAttempt resume_training(const fs::path& root, Communicator& world, DistributedOptimizer& optimizer,
                              data::TrainingBatches& batches, std::ostream& log, bool resume_unrouted) {
  const std::vector<CheckpointTensor> blocks = held_blocks(optimizer);
  ResumeAttempt attempt;
  for (const int64_t step : committed_steps(root, world)) {
    const fs::path directory = root / checkpoint_directory_name(step);
    const auto skip_if_damaged = [&](const std::string& damage) {
      const std::string errors = agree_on_errors(world, damage);
      if (!errors.empty() && world.rank() == 0) {
        log << "warning: checkpoint '" << directory.string() << "' is damaged, skipping it: " << errors << "\n";
      }
      if (!errors.empty()) attempt.damaged.push_back(directory);
      return !errors.empty();
    };

    // 1. The manifest (damage: fall back to the previous checkpoint).
    std::optional<CheckpointReader> reader;
    std::string damage;
    try {
      reader.emplace(directory);
    } catch (const std::exception& e) {
      damage = e.what();
    }
    if (skip_if_damaged(damage)) continue;

    // 2. Does it fit this run? (No: an error everywhere; an older checkpoint would not fit either.)
    PendingErrors errors(world);
    errors.run([&] {
      attempt.unrouted = check_fits(*reader, optimizer, blocks, resume_unrouted);
      batches.check_position(reader->info().data_position, directory.string());
    });
    errors.agree("resuming from " + directory.string());

    // 3. The blocks (damage: fall back).
    attempt.state_overwritten = true;
    try {
      for (const CheckpointTensor& b : blocks) {
        if (reader->contains(b.name)) read_block(*reader, b);  // (only routing ones may be absent)
      }
    } catch (const std::exception& e) {
      damage = e.what();
    }
    if (skip_if_damaged(damage)) continue;

    errors.run([&] {
      optimizer.set_step_count(reader->info().trainer_state["optimizer_step"].get<int64_t>());
      batches.seek(reader->info().data_position, directory.string());
    });
    errors.agree("resuming from " + directory.string());
    const CheckpointState& info = reader->info();
    attempt.resumed = ResumedTraining{info.step, info.tokens, info.config, info.layout, directory};
    return attempt;
  }
  return attempt;
}

}  // namespace linea
