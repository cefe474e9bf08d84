// The settings of the gated-linear-attention family's five mixers (reference/mixers.md §1.5–1.10),
// each read from [model.<mixer>] (or the family's shared table [model.gla]) with fla's keys and
// defaults; every width follows d_model through expand ratios unless the config gives it:
//
//   gla     heads (4), expand_k (0.5), expand_v (1.0): d_k = d·expand_k/heads, d_v = d·expand_v/heads;
//           gate_rank (16, the low-rank decay projection), gate_normalizer (16), output_gate (true)
//   retnet  heads (8), expand_k (1.0), expand_v (2.0), rope_theta (10000)
//   gla and retnet also conv (0: none; W ≥ 2: fla's use_short_conv with conv_size W, a depthwise
//           causal conv of width W and SiLU on each of q, k, v)
//   hgrn2   expand_ratio (128: d_k, the forget width per head; heads = max(1, d/expand_ratio),
//           d_v = d/heads), lower_bound (true: HGRN's lower bounds shared across the stack)
//   mamba2  expand (2: d_in = expand·d), head_dim (64: heads = d_in/head_dim), state_size (128),
//           conv (4, with bias), dt_min (1e-3), dt_max (0.1), dt_floor (1e-4)
//   rwkv6   heads (4), expand_k (0.5), expand_v (1.0), proj_rank (32, the token-shift LoRAs),
//           decay_rank (64, the decay LoRA)
// and every one of them recompute (false, the default: the CUDA forward of a training step keeps
// for the backward what its chunked op saves, ops::gla_saved_bytes, which is 0 for f32 calls and
// widths that pipeline does not take; true: the backward recomputes it, less memory, more time; the CPU always
// recomputes). resolve() fills the derived widths and checks every field; errors name the key under `section`.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "model/mixer_config.h"

namespace linea {

// heads and the per-head widths from expand ratios: d_k = d·expand_k/heads, d_v = d·expand_v/heads.
struct HeadWidths {
  int64_t heads = 4;
  double expand_k = 0.5, expand_v = 1.0;
  int64_t d_k = 0, d_v = 0;  // resolved
  void read(ConfigSection& table);
  void resolve(int64_t d_model, const ConfigFieldError& fail);
};

class GlaConfig final : public MixerConfigOf<GlaConfig> {
 public:
  explicit GlaConfig(std::string section = "model.gla") : MixerConfigOf("gla", std::move(section)) {}
  void read(ConfigSection& table) override;
  void resolve(int64_t d_model, const ConfigFieldError& fail) override;

  HeadWidths widths;
  int64_t gate_rank = 16;
  double gate_normalizer = 16.0;
  bool output_gate = true;
  int64_t conv = 0;        // the q, k, v short convs' kernel size; 0: none
  bool recompute = false;  // true: the backward recomputes what the forward could save
};

class RetNetConfig final : public MixerConfigOf<RetNetConfig> {
 public:
  explicit RetNetConfig(std::string section = "model.gla") : MixerConfigOf("retnet", std::move(section)) {}
  void read(ConfigSection& table) override;
  void resolve(int64_t d_model, const ConfigFieldError& fail) override;

  HeadWidths widths{8, 1.0, 2.0};
  double rope_theta = 10000.0;
  int64_t conv = 0;        // the q, k, v short convs' kernel size; 0: none
  bool recompute = false;  // true: the backward recomputes what the forward could save
};

class Hgrn2Config final : public MixerConfigOf<Hgrn2Config> {
 public:
  explicit Hgrn2Config(std::string section = "model.gla") : MixerConfigOf("hgrn2", std::move(section)) {}
  void read(ConfigSection& table) override;
  void resolve(int64_t d_model, const ConfigFieldError& fail) override;

  int64_t expand_ratio = 128;  // d_k
  bool lower_bound = true;
  bool recompute = false;      // true: the backward recomputes what the forward could save
  int64_t heads = 0, d_v = 0;  // resolved
};

class Mamba2Config final : public MixerConfigOf<Mamba2Config> {
 public:
  explicit Mamba2Config(std::string section = "model.gla") : MixerConfigOf("mamba2", std::move(section)) {}
  void read(ConfigSection& table) override;
  void resolve(int64_t d_model, const ConfigFieldError& fail) override;

  int64_t expand = 2, head_dim = 64, state_size = 128, conv = 4;
  double dt_min = 1e-3, dt_max = 0.1, dt_floor = 1e-4;
  bool recompute = false;        // true: the backward recomputes what the forward could save
  int64_t inner = 0, heads = 0;  // resolved: d_in = expand·d, d_in / head_dim
};

class Rwkv6Config final : public MixerConfigOf<Rwkv6Config> {
 public:
  explicit Rwkv6Config(std::string section = "model.gla") : MixerConfigOf("rwkv6", std::move(section)) {}
  void read(ConfigSection& table) override;
  void resolve(int64_t d_model, const ConfigFieldError& fail) override;

  HeadWidths widths;
  int64_t proj_rank = 32, decay_rank = 64;
  bool recompute = false;  // true: the backward recomputes what the forward could save
};

}  // namespace linea
