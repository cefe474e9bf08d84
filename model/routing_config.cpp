#include "model/routing_config.h"

#include <algorithm>

#include "data/config_reader.h"
#include "model/mixer_config.h"

namespace linea {

namespace {
const std::vector<std::string>& kind_names() {
  static const std::vector<std::string> names = {"none", "cler", "cler_h", "clvr"};
  return names;
}
}  // namespace

const char* routing_kind_name(RoutingKind kind) { return kind_names()[static_cast<size_t>(kind)].c_str(); }

void RoutingConfig::read(ConfigSection& table) {
  const std::string name = table.choice("kind", routing_kind_name(kind), kind_names());
  kind = static_cast<RoutingKind>(std::find(kind_names().begin(), kind_names().end(), name) - kind_names().begin());
  layers = table.integer_list("layers", layers);
  stop_grad = table.boolean("stop_grad", stop_grad);
  projection = table.choice("projection", projection, {"auto", "linear"});
  resume_unrouted = table.boolean("resume_unrouted", resume_unrouted);
}

void RoutingConfig::resolve(const std::vector<bool>& delta_rule_layers, const ConfigFieldError& fail) {
  const int64_t n = static_cast<int64_t>(delta_rule_layers.size());
  sends_to.assign(static_cast<size_t>(n), -1);
  receives_from.assign(static_cast<size_t>(n), -1);
  if (projection != "auto" && projection != "linear") {
    fail("projection", "expected \"auto\" or \"linear\", got '" + projection + "'");
  }
  if (!enabled()) {
    if (!layers.empty()) fail("layers", "routing layers are given but kind = \"none\"");
    return;
  }
  if (kind != RoutingKind::cler) {
    if (stop_grad)
      fail("stop_grad", "only kind = \"cler\" routes a gradient through r, got kind = \"" +
                            std::string(routing_kind_name(kind)) + "\"");
    if (projection != "auto") fail("projection", "only kind = \"cler\" has a projection Π");
  }
  // The next delta-rule layer after `layer`, or −1.
  const auto next_delta_rule = [&](int64_t layer) {
    for (int64_t j = layer + 1; j < n; ++j) {
      if (delta_rule_layers[static_cast<size_t>(j)]) return j;
    }
    return int64_t(-1);
  };
  std::vector<int64_t> senders = layers;
  if (senders.empty()) {
    for (int64_t i = 0; i < n; ++i) {
      if (delta_rule_layers[static_cast<size_t>(i)] && (kind != RoutingKind::cler || next_delta_rule(i) >= 0)) {
        senders.push_back(i);
      }
    }
    if (senders.empty()) {
      fail("kind", std::string("no layer can route: ") +
                       (kind == RoutingKind::cler ? "cler needs two delta-rule layers (deltanet, gdn, kda, gdn2)"
                                                  : "the model has no delta-rule layer (deltanet, gdn, kda, gdn2)"));
    }
  }
  std::sort(senders.begin(), senders.end());
  for (size_t i = 0; i < senders.size(); ++i) {
    const int64_t layer = senders[i];
    const std::string which = "layer " + std::to_string(layer);
    if (layer < 0 || layer >= n) fail("layers", which + " is outside [0, " + std::to_string(n) + ")");
    if (i > 0 && senders[i - 1] == layer) fail("layers", which + " is listed twice");
    if (!delta_rule_layers[static_cast<size_t>(layer)]) {
      fail("layers", which + " is not a delta-rule layer (deltanet, gdn, kda, gdn2); only those route");
    }
    if (kind == RoutingKind::cler) {
      const int64_t receiver = next_delta_rule(layer);
      if (receiver < 0) fail("layers", which + " has no later delta-rule layer to receive its write error");
      sends_to[static_cast<size_t>(layer)] = receiver;
      receives_from[static_cast<size_t>(receiver)] = layer;
    } else {
      sends_to[static_cast<size_t>(layer)] = layer;
    }
  }
}

}  // namespace linea
