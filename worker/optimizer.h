// Optimizer: the interface the trainer holds, whichever update rule the config names.
//
// step() applies one update to every parameter of a finalized ParameterSet from the gradients
// accumulated in it (gradients are read, not cleared); lr is this step's learning rate from the
// schedule. The optimizer binds to the set's parameters at its first step() or import_state() and
// then refuses any other set. Master weights are f32 (or f64 for tests) on the CPU, or f32 on the
// current CUDA device (then the state lives there too, and every update runs there).
//
// OptimizerState is everything needed to continue bit for bit: the kind, the number of steps taken
// and one tensor per parameter and buffer, named "<buffer>/<parameter name>" (e.g. "adamw.m/x",
// "adamw.v/x", "muon.momentum/x"), each shaped like its parameter and on the host whatever the
// parameters' device. export_state() deep-copies, so the copy can be written by another thread
// while training goes on; import_state() validates the whole state before changing anything
// (std::invalid_argument naming the tensor otherwise).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "kernels/tensor.h"
#include "model/parameters.h"
#include "worker/optimizer_config.h"

namespace linea {

struct OptimizerState {
  std::string kind;  // optimizer_kind_name() of the optimizer that wrote it
  int64_t step = 0;  // optimizer steps taken
  // Complete, or empty when step == 0 (an optimizer that has not stepped yet has no buffers).
  std::map<std::string, Tensor> tensors;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual OptimizerKind kind() const = 0;
  virtual void step(ParameterSet& params, double lr) = 0;
  virtual int64_t step_count() const = 0;
  virtual OptimizerState export_state() const = 0;
  virtual void import_state(const OptimizerState& state, const ParameterSet& params) = 0;
};

// For step() implementations: throws std::invalid_argument unless lr is finite and >= 0.
void check_learning_rate(double lr);

// Validates the config and builds the optimizer it names.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config);

}  // namespace linea
