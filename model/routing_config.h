// RoutingConfig: cross-layer routing between the delta-rule layers of a model
// (reference/mixers.md §5.2), read from [model.routing]:
//
//   kind       "none" (default) | "cler" | "cler_h" | "clvr"
//                cler:   layer ℓ's write error r feeds the value target of the next delta-rule layer
//                        ℓ' > ℓ: v^{ℓ'} ← v^{ℓ'} + λ^{ℓ'} ⊙ Π(r^ℓ), after ℓ''s conv + SiLU
//                cler_h: x ← x + W_o o + W_E concat_h(RMSNorm(r^{ℓ,h}))
//                clvr:   x ← x + W_o o + W_V concat_h(ṽ^{ℓ,h}), ṽ the written value (β v, or w ⊙ v)
//   layers     the layers that route (send), each a delta-rule layer; default: every delta-rule
//              layer (for cler: every one with a later delta-rule layer to receive it). Softmax
//              attention and the other linear families never route and are skipped as receivers.
//   stop_grad  cler only: no gradient through r into the sending layer (default false)
//   projection cler only: "auto" (default: Π = identity per head when both layers have the same
//              heads and d_v, a linear map H·d_v → H'·d_v' otherwise) or "linear" (always the map)
//   resume_unrouted  true: resuming a checkpoint written without these routing parameters starts
//              them at their initial values (zero) instead of failing (default false)
//
// Every new parameter starts so that the routed model equals its baseline exactly at step 0: W_E,
// W_V and Π are zero and λ is zero (one with Π, so that Π gets a gradient). resolve() checks the
// keys against the layers' mixers; errors name model.routing.KEY.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace linea {

class ConfigSection;
struct ConfigFieldError;

enum class RoutingKind { none, cler, cler_h, clvr };
const char* routing_kind_name(RoutingKind kind);

struct RoutingConfig {
  RoutingKind kind = RoutingKind::none;
  std::vector<int64_t> layers;  // as given (empty: the default set)
  bool stop_grad = false;
  std::string projection = "auto";
  bool resume_unrouted = false;

  // Filled by resolve(): for every layer of the stack, where it sends (cler: the receiving layer;
  // cler_h, clvr: itself; −1: it does not route) and, for cler, which layer it receives from (−1).
  std::vector<int64_t> sends_to, receives_from;

  bool enabled() const { return kind != RoutingKind::none; }
  void read(ConfigSection& table);
  // routed[i]: whether layer i is a delta-rule layer (the only kind that routes).
  void resolve(const std::vector<bool>& delta_rule_layers, const ConfigFieldError& fail);
};

}  // namespace linea
