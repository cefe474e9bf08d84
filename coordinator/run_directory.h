// What a run's directory says about the run, read by the coordinator (which does not link the
// trainer): RUN_DIR/config.toml (the resolved configuration `linea train` writes),
// RUN_DIR/checkpoints/step-NNNNNNNNN/ with its COMMITTED marker (the layout of
// checkpoint/checkpoint_directory.h) and RUN_DIR/metrics.jsonl.
// A run is finished when metrics.jsonl holds a {"finished": true} line, or when its newest committed
// checkpoint is at its last step (train.stop_at when set and smaller, else train.steps): the state
// at the end is durable, so launching it again could only redo nothing.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace linea::coordinator {

// The newest step with a committed checkpoint; nullopt when there is none.
std::optional<int64_t> newest_committed_checkpoint(const std::string& run_dir);
// The last step config.toml asks for; nullopt when there is no config.toml or it lacks train.steps.
// Throws std::runtime_error naming the file when it is not valid TOML.
std::optional<int64_t> configured_last_step(const std::string& run_dir);
// Throws std::runtime_error (naming the file) for an unreadable config.toml or metrics.jsonl.
bool run_finished(const std::string& run_dir);

}  // namespace linea::coordinator
