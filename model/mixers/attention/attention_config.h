// AttentionConfig: the settings of softmax attention (reference/mixers.md §4.3), read from
// [model.attention] (or [model.<mixer>]): heads, kv_heads (default heads), head_dim (default
// d_model/heads, or 64 when heads is not given either), window (0 = full causal), rope_theta,
// backend (auto | cudnn | own: which CUDA implementation runs it, attention.h), cudnn_autotune
// (default true: time cuDNN's candidate engine configurations per shape and keep the fastest;
// false: the heuristics' first).
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "model/mixer_config.h"
#include "model/mixers/attention/attention.h"

namespace linea {

class AttentionConfig final : public MixerConfigOf<AttentionConfig> {
 public:
  explicit AttentionConfig(std::string section = "model.attention") : MixerConfigOf("attention", std::move(section)) {}

  void read(ConfigSection& table) override;
  void resolve(int64_t d_model, const ConfigFieldError& fail) override;

  int64_t heads = 0;     // 0 → d_model / head_dim
  int64_t kv_heads = 0;  // 0 → heads
  int64_t head_dim = 0;  // 0 → d_model / heads, or 64 when heads is 0 too
  int64_t window = 0;
  double rope_theta = 10000.0;
  ops::AttentionBackend backend = ops::AttentionBackend::automatic;
  bool cudnn_autotune = false;  // opt-in until timed on a GPU (docs/gpu.md)
};

}  // namespace linea
