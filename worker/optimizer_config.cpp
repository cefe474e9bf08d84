#include "worker/optimizer_config.h"

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

namespace linea {
namespace {

template <class V>
void require(bool ok, std::string_view field, std::string_view expected, V got) {
  if (ok) return;
  std::ostringstream os;
  os << "optimizer." << field << ": expected " << expected << ", got " << got;
  throw std::invalid_argument(os.str());
}

}  // namespace

void validate(const OptimizerConfig& c) {
  require(std::isfinite(c.lr) && c.lr > 0, "lr", "a finite number > 0", c.lr);
  require(c.beta1 >= 0 && c.beta1 < 1, "beta1", "a number in [0, 1)", c.beta1);
  require(c.beta2 >= 0 && c.beta2 < 1, "beta2", "a number in [0, 1)", c.beta2);
  require(std::isfinite(c.eps) && c.eps > 0, "eps", "a finite number > 0", c.eps);
  require(std::isfinite(c.weight_decay) && c.weight_decay >= 0, "weight_decay", "a finite number >= 0", c.weight_decay);
  require(c.muon_momentum >= 0 && c.muon_momentum < 1, "muon_momentum", "a number in [0, 1)", c.muon_momentum);
  require(c.ns_steps >= 1 && c.ns_steps <= 100, "ns_steps", "an integer in [1, 100]", c.ns_steps);
  require(std::isfinite(c.grad_clip) && c.grad_clip >= 0, "grad_clip", "a finite number >= 0 (0 disables)",
          c.grad_clip);
  require(c.warmup_steps >= 0, "warmup_steps", "an integer >= 0", c.warmup_steps);
  require(c.lr_min_ratio >= 0 && c.lr_min_ratio <= 1, "lr_min_ratio", "a number in [0, 1]", c.lr_min_ratio);
  require(c.wsd_decay_ratio >= 0 && c.wsd_decay_ratio <= 1, "wsd_decay_ratio", "a number in [0, 1]", c.wsd_decay_ratio);
}

std::string_view optimizer_kind_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::adamw: return "adamw";
    case OptimizerKind::muon: return "muon";
  }
  return "?";
}

std::string_view lr_schedule_kind_name(LrScheduleKind kind) {
  switch (kind) {
    case LrScheduleKind::warmup_cosine: return "warmup_cosine";
    case LrScheduleKind::constant: return "constant";
    case LrScheduleKind::wsd: return "wsd";
  }
  return "?";
}

OptimizerKind parse_optimizer_kind(std::string_view name, std::string_view field) {
  for (OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::muon}) {
    if (name == optimizer_kind_name(kind)) return kind;
  }
  throw std::invalid_argument(std::string(field) + ": expected \"adamw\" or \"muon\", got \"" + std::string(name) +
                              "\"");
}

LrScheduleKind parse_lr_schedule_kind(std::string_view name, std::string_view field) {
  for (LrScheduleKind kind : {LrScheduleKind::warmup_cosine, LrScheduleKind::constant, LrScheduleKind::wsd}) {
    if (name == lr_schedule_kind_name(kind)) return kind;
  }
  throw std::invalid_argument(std::string(field) + ": expected \"warmup_cosine\", \"constant\" or \"wsd\", got \"" +
                              std::string(name) + "\"");
}

}  // namespace linea
