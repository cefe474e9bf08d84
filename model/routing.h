// What one layer does in the model's cross-layer routing (model/routing_config.h,
// reference/mixers.md §5.2), as Model hands it to the layer (through Block and LayerPlace).
//
// CLER joins two delta-rule layers by a WriteErrorLink: the sending layer ℓ's forward stores its
// write error r there (in ctx.activations, kept for the step) and its shape; the receiving layer
// ℓ' > ℓ reads it in forward and, unless stop_grad, leaves ∂L/∂r there in its backward (which runs
// before ℓ's), for ℓ's backward to take into its delta rule. CLER-H and CLVR stay inside one layer.
// Under tensor parallelism both layers hold the same heads of r (they are sharded alike), so a
// link carries this rank's heads only.
#pragma once
#include <cstdint>
#include <string_view>

#include "kernels/tensor.h"
#include "model/routing_config.h"

namespace linea {

struct WriteErrorLink {
  Tensor r;                    // the sender's write error this step, [N, H·d_v] of this rank's heads
  Tensor dr;                   // ∂L/∂r from the receiver's backward; undefined: none (stop_grad)
  int64_t heads = 0, d_v = 0;  // the sender's (full) heads and value width, set when it is built
};

struct LayerRouting {
  RoutingKind kind = RoutingKind::none;
  bool sends = false;                 // cler_h, clvr: adds its routed term; cler: fills `send`
  WriteErrorLink* send = nullptr;     // cler: where this layer's r goes
  WriteErrorLink* receive = nullptr;  // cler: whose r this layer's value target takes
  bool stop_grad = false;             // cler: no ∂L/∂r back to the sender
  bool always_project = false;        // cler: Π is a linear map even when the shapes match
};

// Whether a parameter name (or a checkpoint tensor's, which contains it) is one that routing
// declares (model/mixers/delta_rule/delta_rule_layer.h: ….cler_lambda, ….cler_proj.weight,
// ….cler_h_norm.weight, ….cler_h_proj.weight, ….clvr_proj.weight).
inline bool is_routing_parameter(std::string_view name) {
  return name.find(".cler_") != std::string_view::npos || name.find(".clvr_") != std::string_view::npos;
}

}  // namespace linea
