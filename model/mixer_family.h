// MixerFamily: what one family of token mixers (a folder model/mixers/<family>/) gives the rest of
// linea, so that nothing outside the folder decides anything by mixer kind. The registry
// (model/mixer_registry.h) holds one per family; a family provides one or more named mixers (its
// presets: delta_rule's deltanet, gdn, kda and gdn2), each built from one config type.
//
//   config       make_config: a mixer's defaults; MixerConfig::read / resolve do the rest
//   layer        make_layer: one layer of the mixer, which declares its parameters with their
//                optimizer roles (ParamRole) and shards itself over the tensor-parallel group
//   parameters   parameter_group: the group `linea params` counts its layers' parameters in
//   memory       wide_values_per_token, cuda_workspace_bytes, cuda_saved_bytes (bench_memory's model);
//                decoding_memory (`linea params --inference`)
//   FLOPs        mixing_flops_per_token (bench_train's model FLOPs)
//   linea mixer  problem_format: reading an fla-layout HDF5 problem and running it, if the family
//                has such a format (null otherwise)
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/mixer.h"
#include "model/mixer_config.h"
#include "model/parameters.h"
#include "model/tensor_parallel.h"

namespace linea {

class MixerProblemFormat;

struct LayerRouting;

// Where a layer sits: its index in the stack of `count` layers; and its part in cross-layer
// routing (model/routing.h; null or kind none: none), which only families that routes() take.
struct LayerPlace {
  int64_t index = 0;
  int64_t count = 1;
  const LayerRouting* routing = nullptr;
};

class MixerFamily {
 public:
  virtual ~MixerFamily() = default;

  // The folder's name ("delta_rule").
  virtual std::string_view name() const = 0;
  // The mixer names it provides, in the order help texts list them.
  virtual const std::vector<std::string>& mixers() const = 0;
  // The one whose defaults an unused shared table is read with ("gdn" for the delta rule).
  virtual std::string_view default_mixer() const = 0;
  // The table under [model] that configs of its mixers are read from when [model.<mixer>] is
  // absent ("linear" for the delta rule, "attention"): the keys configs have always used. The
  // table is read even when no layer uses the family (with the default mixer's defaults), so that
  // switching mixers on the command line leaves no key unread.
  virtual std::string_view shared_section() const = 0;
  // `linea params`' group of its layers' parameters ("linear mixers", "attention").
  virtual std::string_view parameter_group() const = 0;
  // Whether its layers take part in cross-layer routing (model.routing: the delta rule's do).
  virtual bool routes() const { return false; }

  // The defaults of `mixer` (one of mixers()), to be read from the table `section`.
  virtual std::unique_ptr<MixerConfig> make_config(std::string_view mixer, std::string section) const = 0;
  // One layer, x: [N, d_model] → y: [N, d_model], parameters named PREFIX.*; config resolved.
  // `place` is the layer's index in the stack and the stack's depth. A layer may also use
  // parameters shared by the layers of the stack (HGRN's lower bounds), named "<mixer>.…" and
  // declared by the first layer that asks for them.
  virtual std::unique_ptr<Mixer> make_layer(ParameterSet& params, const std::string& prefix, int64_t d_model,
                                            double norm_eps, const MixerConfig& config, const TensorParallel& tp,
                                            const LayerPlace& place) const = 0;

  // Memory model: per token and layer, how many of the values forward keeps stay 4 bytes wide in a
  // bf16 step (f32 gates, statistics); the bytes of the CUDA workspaces one layer's backward takes
  // on `tokens` tokens (shared by the layers: the largest counts); and what one layer's CUDA
  // forward keeps for its backward on `tokens` tokens beyond what the CPU measurement of
  // bench_memory sees (every layer keeps its own).
  virtual double wide_values_per_token(const MixerConfig& config) const = 0;
  virtual double cuda_workspace_bytes(const MixerConfig& config, int64_t tokens) const = 0;
  virtual double cuda_saved_bytes(const MixerConfig&, int64_t) const { return 0; }
  // Decoding memory of one layer (its MixerState, model/mixer.h), in values: fixed per sequence,
  // the recurrent state (held in f32 when the run computes in bf16: model/mixer.h zero_state) and
  // the conv or token-shift inputs (in the compute dtype), and per token seen (a KV cache, in the
  // compute dtype) for at most max_tokens tokens (a sliding window keeps window − 1; 0: all).
  struct DecodingMemory {
    double state = 0, inputs = 0, per_token = 0;
    int64_t max_tokens = 0;
  };
  virtual DecodingMemory decoding_memory(const MixerConfig& config, int64_t d_model) const = 0;
  // FLOPs per token of one layer's sequence mixing, forward and backward, beyond the 6 per
  // parameter of its projections, at sequence length seq_len.
  virtual double mixing_flops_per_token(const MixerConfig& config, int64_t seq_len) const = 0;

  // `linea mixer`'s problem format for this family's mixers; null when there is none.
  virtual const MixerProblemFormat* problem_format() const { return nullptr; }
};

// The config of a family's mixer as the family's type T; throws std::logic_error if it is not one.
template <class T>
const T& config_as(const MixerConfig& config) {
  const T* typed = dynamic_cast<const T*>(&config);
  if (!typed) throw std::logic_error("mixer '" + config.mixer + "': config of another family");
  return *typed;
}

}  // namespace linea
