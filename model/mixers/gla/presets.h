// The five mixers of the gated-linear-attention family (model/mixers/gla/gla.h) and the op spec each
// one runs (reference/mixers.md §1.5–1.10, §1.11):
//
//   gla     per-channel decay, given key, reads S_t, scale 1/√K
//   retnet  fixed decay per head, log(1 − 2^{−5−h}) (retnet_log_decays), given key, 1/√K
//   hgrn2   per-channel decay, key tied to it (k = 1 − exp(g)), reads S_t, 1/√K
//   mamba2  one decay per token and head, given key, reads S_t, scale 1
//   rwkv6   per-channel decay, given key, reads S_{t−1} plus the bonus u, scale 1
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/tensor.h"
#include "model/mixers/gla/gla.h"

namespace linea::ops {

enum class GlaMixer { gla, retnet, hgrn2, mamba2, rwkv6 };

const std::vector<GlaMixer>& gla_mixers();
std::string_view gla_mixer_name(GlaMixer mixer);
// The mixer called `name`, or none.
bool find_gla_mixer(std::string_view name, GlaMixer& mixer);
GlaSpec gla_mixer_spec(GlaMixer mixer, int64_t key_dim);

// RetNet's log decays log(1 − 2^{−5−h}) for the global heads h = first_head … first_head + heads − 1,
// as a [heads] CPU tensor in `dtype` (f32 or f64): the g of GlaDecay::head.
Tensor retnet_log_decays(int64_t heads, int64_t first_head, DType dtype);

}  // namespace linea::ops
