#include "model/mixers/gla/presets.h"

#include <cmath>
#include <stdexcept>

namespace linea::ops {

const std::vector<GlaMixer>& gla_mixers() {
  static const std::vector<GlaMixer> all = {GlaMixer::gla, GlaMixer::retnet, GlaMixer::hgrn2, GlaMixer::mamba2,
                                            GlaMixer::rwkv6};
  return all;
}

std::string_view gla_mixer_name(GlaMixer mixer) {
  switch (mixer) {
    case GlaMixer::gla: return "gla";
    case GlaMixer::retnet: return "retnet";
    case GlaMixer::hgrn2: return "hgrn2";
    case GlaMixer::mamba2: return "mamba2";
    case GlaMixer::rwkv6: return "rwkv6";
  }
  return "?";
}

bool find_gla_mixer(std::string_view name, GlaMixer& mixer) {
  for (GlaMixer m : gla_mixers()) {
    if (gla_mixer_name(m) == name) {
      mixer = m;
      return true;
    }
  }
  return false;
}

GlaSpec gla_mixer_spec(GlaMixer mixer, int64_t key_dim) {
  const double inverse_sqrt_k = 1.0 / std::sqrt(static_cast<double>(key_dim));
  switch (mixer) {
    case GlaMixer::gla: return {GlaDecay::channel, GlaKey::given, GlaReadout::after_write, inverse_sqrt_k};
    case GlaMixer::retnet: return {GlaDecay::head, GlaKey::given, GlaReadout::after_write, inverse_sqrt_k};
    case GlaMixer::hgrn2: return {GlaDecay::channel, GlaKey::one_minus_decay, GlaReadout::after_write, inverse_sqrt_k};
    case GlaMixer::mamba2: return {GlaDecay::scalar, GlaKey::given, GlaReadout::after_write, 1.0};
    case GlaMixer::rwkv6: return {GlaDecay::channel, GlaKey::given, GlaReadout::before_write_bonus, 1.0};
  }
  throw std::invalid_argument("gla_mixer_spec: unknown mixer");
}

Tensor retnet_log_decays(int64_t heads, int64_t first_head, DType dtype) {
  if (dtype != DType::f32 && dtype != DType::f64) {
    throw std::invalid_argument("retnet_log_decays: dtype must be f32 or f64");
  }
  Tensor g = Tensor::empty({heads}, dtype);
  for (int64_t h = 0; h < heads; ++h) {
    // log(1 − 2^{−5−h}) = log1p(−2^{−5−h}), exact for the deep heads whose decay is close to 1
    const double value = std::log1p(-std::exp2(-5.0 - static_cast<double>(first_head + h)));
    if (dtype == DType::f32) {
      g.data<float>()[h] = static_cast<float>(value);
    } else {
      g.data<double>()[h] = value;
    }
  }
  return g;
}

}  // namespace linea::ops
