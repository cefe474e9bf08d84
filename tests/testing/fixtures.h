// Where the committed test fixtures are: tests/data/ of the source tree (ctest sets
// LINEA_SOURCE_DIR; run by hand from the repository root it defaults to ".").
#pragma once
#include <cstdlib>
#include <filesystem>

namespace linea::testing {

inline std::filesystem::path fixture_dir() {
  const char* source = std::getenv("LINEA_SOURCE_DIR");
  return std::filesystem::path(source && *source ? source : ".") / "tests" / "data";
}

}  // namespace linea::testing
