// Where a client command finds the coordinator: --coordinator HOST:PORT (else $LINEA_COORDINATOR,
// else 127.0.0.1:47431) and --token-file FILE (else $LINEA_COORDINATOR_TOKEN_FILE, else the
// default the coordinator creates, ~/.linea/coordinator/token).
#pragma once
#include <string>

#include "cli/command_line.h"
#include "coordinator/protocol.h"

namespace linea::cli {

// The coordinator's default state directory: $HOME/.linea/coordinator (./.linea/coordinator without HOME).
std::string default_state_dir();

struct CoordinatorConnection {
  coordinator::Endpoint endpoint;
  std::string token;

  // From the options that with_connection_options declared (after parsing).
  static CoordinatorConnection from_flags(const CommandLine& flags);
  // Sends one request; throws std::runtime_error with the coordinator's error.
  nlohmann::json request(nlohmann::json message) const;
};

// Declares the two options above; kConnectionOptionsHelp holds their help lines.
CommandLine& with_connection_options(CommandLine& cli);
extern const char* const kConnectionOptionsHelp;

}  // namespace linea::cli
