// Small sizes for a GLA-family or HGRN mixer's config in tests, in the terms the delta rule's tests
// use: `heads` heads of key width d_k and value width d_v at d_model (GLA, RetNet, RWKV-6 through
// their expand ratios; HGRN-2's forget width d_k; Mamba-2's state d_k and head dim 2·d_model/heads;
// HGRN one channel per model channel), low-rank widths `rank`. The config is left unresolved.
#pragma once
#include <cstdint>

#include "model/mixer_config.h"
#include "model/mixers/gla/gla_configs.h"
#include "model/mixers/hgrn/hgrn_config.h"

namespace linea::testing {

inline void set_gla_family_sizes(MixerConfig& config, int64_t d_model, int64_t heads, int64_t d_k, int64_t d_v,
                                 int64_t rank) {
  const HeadWidths widths{heads, double(heads * d_k) / double(d_model), double(heads * d_v) / double(d_model)};
  if (auto* c = dynamic_cast<GlaConfig*>(&config)) c->widths = widths, c->gate_rank = rank;
  if (auto* c = dynamic_cast<RetNetConfig*>(&config)) c->widths = widths;
  if (auto* c = dynamic_cast<Rwkv6Config*>(&config)) c->widths = widths, c->proj_rank = rank, c->decay_rank = rank;
  if (auto* c = dynamic_cast<Hgrn2Config*>(&config)) c->expand_ratio = d_k;
  if (auto* c = dynamic_cast<Mamba2Config*>(&config)) c->head_dim = 2 * d_model / heads, c->state_size = d_k;
  if (auto* c = dynamic_cast<HgrnConfig*>(&config)) c->expand_ratio = 1;
}

}  // namespace linea::testing
