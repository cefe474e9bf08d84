// `linea params`, run in-process through the command registry: it prints the group and role tables
// with the same totals as count_parameters(), applies overrides, and reports bad configs by file
// and key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/command.h"
#include "data/config_reader.h"
#include "model/model_config.h"
#include "model/parameter_count.h"
#include "tests/testing/kernel_test.h"

namespace linea {
namespace {

std::filesystem::path tiny_config() {
  const char* dir = std::getenv("LINEA_SOURCE_DIR");
  const std::filesystem::path root =
      dir ? std::filesystem::path(dir) : std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
  return root / "configs" / "models" / "tiny.toml";
}

int run_params(std::vector<std::string> args) {
  const auto& registry = cli::command_registry();
  const auto command =
      std::find_if(registry.begin(), registry.end(), [](const cli::Command& c) { return c.name == "params"; });
  if (command == registry.end()) throw std::logic_error("the params command is not registered");
  args.insert(args.begin(), "params");
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  return command->run(static_cast<int>(argv.size()), argv.data());
}

TEST(ParamsCommand, PrintsTheCountOfTheConfig) {
  const std::string path = tiny_config().string();
  ConfigReader reader = ConfigReader::from_file(path, {"model.layers=8"});
  const ParameterCount expected = count_parameters(ModelConfig::parse(reader.section("model")));

  ::testing::internal::CaptureStdout();
  const int rc = run_params({path, "model.layers=8"});
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("8 layers (2 attention: 3:1)"), std::string::npos) << out;
  EXPECT_NE(out.find(std::to_string(expected.total)), std::string::npos) << out;
  EXPECT_NE(out.find(std::to_string(expected.group("linear mixers"))), std::string::npos) << out;
  for (const char* row :
       {"embedding", "attention", "linear mixers", "mlp", "norms", "matrix", "gate", "conv", "non-embedding"}) {
    EXPECT_NE(out.find(row), std::string::npos) << row;
  }
}

TEST(ParamsCommand, BadInput) {
  const std::string path = tiny_config().string();
  EXPECT_TRUE(testing::throws_invalid_argument(
      [&] {
        run_params({path, "model.linear.hedas=2"});
      },
      {"tiny.toml: unknown key 'model.linear.hedas'", "did you mean 'model.linear.heads'"}));
  EXPECT_TRUE(testing::throws_invalid_argument(
      [&] {
        run_params({path, "model.hybrid=2:3"});
      },
      {"tiny.toml: model.hybrid", "'2:3'"}));
  EXPECT_TRUE(testing::throws_invalid_argument([&] { run_params({"/nonexistent.toml"}); },
                                               {"cannot open config file '/nonexistent.toml'"}));
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run_params({}), 2);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("usage: linea params"), std::string::npos);
}

}  // namespace
}  // namespace linea
