// OptimizerConfig: every setting of the optimizer, the learning-rate schedule and gradient clipping,
// as a plain struct with the defaults of reference/mixers.md §4.1–4.2 and §6.2 (the run's TOML
// parser fills it). validate() throws std::invalid_argument naming the field and what was expected.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace linea {

enum class OptimizerKind {
  adamw,  // AdamW for every parameter
  muon,   // Muon for ParamRole::matrix parameters, AdamW for the rest
};
enum class LrScheduleKind {
  warmup_cosine,  // linear warmup, cosine decay to lr_min_ratio·lr at the last step
  constant,       // linear warmup, then lr
  wsd,            // warmup, stable at lr, linear decay to lr_min_ratio·lr over the last wsd_decay_ratio of steps
};

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::adamw;
  double lr = 3e-4;  // peak learning rate (AdamW's, and Muon's with match_rms_adamw scaling)
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;      // decoupled: θ ← θ − lr·λ·θ
  bool decay_embeddings = false;  // whether ParamRole::embedding parameters get weight decay
  double muon_momentum = 0.95;    // Nesterov momentum of Muon
  int ns_steps = 5;               // Newton–Schulz iterations of Muon
  double grad_clip = 1.0;         // max global gradient L2 norm; 0 disables clipping
  LrScheduleKind schedule = LrScheduleKind::warmup_cosine;
  int64_t warmup_steps = 0;
  double lr_min_ratio = 0.1;     // floor of the decay, as a fraction of lr
  double wsd_decay_ratio = 0.2;  // fraction of all steps spent decaying (schedule wsd only)
  // ZeRO-1 under data parallelism: optimizer state and the update sharded over the DP ranks
  // (worker/distributed_optimizer.h). Unset: on when there is more than one DP rank.
  std::optional<bool> zero;
};

// Throws std::invalid_argument ("optimizer.<field>: expected ..., got ...") on the first bad field.
void validate(const OptimizerConfig& config);

std::string_view optimizer_kind_name(OptimizerKind kind);
std::string_view lr_schedule_kind_name(LrScheduleKind kind);
// Parse the names above; `field` (e.g. "optimizer.kind") is quoted in the error for anything else.
OptimizerKind parse_optimizer_kind(std::string_view name, std::string_view field);
LrScheduleKind parse_lr_schedule_kind(std::string_view name, std::string_view field);

}  // namespace linea
