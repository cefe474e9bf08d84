#include "worker/optimizer.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "worker/adamw.h"
#include "worker/muon.h"

namespace linea {

void check_learning_rate(double lr) {
  if (!std::isfinite(lr) || lr < 0) {
    throw std::invalid_argument("optimizer step: learning rate must be finite and >= 0, got " + std::to_string(lr));
  }
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config) {
  validate(config);
  switch (config.kind) {
    case OptimizerKind::adamw: return std::make_unique<AdamW>(config);
    case OptimizerKind::muon: return std::make_unique<Muon>(config);
  }
  throw std::invalid_argument("make_optimizer: unknown optimizer kind");
}

}  // namespace linea
