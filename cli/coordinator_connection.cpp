#include "cli/coordinator_connection.h"

#include <cstdlib>

#include "coordinator/client.h"
#include "coordinator/token_file.h"

namespace linea::cli {

const char* const kConnectionOptionsHelp =
    "  --coordinator HOST:PORT  the coordinator (default: $LINEA_COORDINATOR, else 127.0.0.1:47431)\n"
    "  --token-file FILE        its token (default: $LINEA_COORDINATOR_TOKEN_FILE, else\n"
    "                           ~/.linea/coordinator/token)\n";

std::string default_state_dir() {
  const char* home = std::getenv("HOME");
  return (home && *home ? std::string(home) : std::string(".")) + "/.linea/coordinator";
}

CommandLine& with_connection_options(CommandLine& cli) { return cli.option({"coordinator", "token-file"}); }

CoordinatorConnection CoordinatorConnection::from_flags(const CommandLine& flags) {
  const char* env_endpoint = std::getenv("LINEA_COORDINATOR");
  const char* env_token = std::getenv("LINEA_COORDINATOR_TOKEN_FILE");
  CoordinatorConnection c;
  if (const auto e = flags.get("coordinator"))
    c.endpoint = coordinator::Endpoint::parse(*e, "--coordinator");
  else if (env_endpoint && *env_endpoint)
    c.endpoint = coordinator::Endpoint::parse(env_endpoint, "LINEA_COORDINATOR");
  const std::string token_file =
      flags.get("token-file").value_or(env_token && *env_token ? env_token : default_state_dir() + "/token");
  c.token = coordinator::read_token_file(token_file);
  return c;
}

nlohmann::json CoordinatorConnection::request(nlohmann::json message) const {
  return coordinator::send_request(endpoint, token, std::move(message));
}

}  // namespace linea::cli
