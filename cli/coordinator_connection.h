// Where a client command finds the coordinator: --coordinator HOST:PORT (else $LINEA_COORDINATOR,
// else 127.0.0.1:47431) and --token-file FILE (else $LINEA_COORDINATOR_TOKEN_FILE, else the
// default the coordinator creates, ~/.linea/coordinator/token).
#pragma once
#include <string>

#include "cli/flags.h"
#include "coordinator/protocol.h"

namespace linea::cli {

// The coordinator's default state directory: $HOME/.linea/coordinator (./.linea/coordinator without HOME).
std::string default_state_dir();

struct CoordinatorConnection {
  coordinator::Endpoint endpoint;
  std::string token;

  static CoordinatorConnection from_flags(const Flags& flags);
  // Sends one request; throws std::runtime_error with the coordinator's error.
  nlohmann::json request(nlohmann::json message) const;
};

// The help lines for the two options above.
extern const char* const kConnectionOptionsHelp;

}  // namespace linea::cli
