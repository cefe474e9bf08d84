#include "cli/command.h"

namespace linea::cli {

// A function-local static, so that registrations in other translation units may run first.
std::vector<Command>& command_registry() {
  static std::vector<Command> registry;
  return registry;
}

}  // namespace linea::cli
