// `linea params CONFIG.toml [section.key=value ...]`: the parameter count of the [model] in a config,
// by group and by optimizer role, without allocating the model.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/command.h"
#include "data/config_reader.h"
#include "model/model_config.h"
#include "model/parameter_count.h"

namespace linea::cli {
namespace {

constexpr const char* kUsage =
    "usage: linea params CONFIG.toml [section.key=value ...]\n"
    "\n"
    "Prints the parameter count of the model in CONFIG.toml ([model] table) by group and by optimizer\n"
    "role, after applying the overrides (e.g. model.layers=12 model.hybrid=3:1). Nothing is allocated.\n";

int run_params(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::vector<std::string> overrides(argv + 2, argv + argc);
  ConfigReader reader = ConfigReader::from_file(argv[1], overrides);
  const ModelConfig config = ModelConfig::parse(reader.section("model"));
  reader.check_unknown_keys({"model"});
  std::fputs(format_parameter_count(config, count_parameters(config)).c_str(), stdout);
  return 0;
}

const CommandRegistration registration({"params", "count a model config's parameters by group", run_params});

}  // namespace
}  // namespace linea::cli
