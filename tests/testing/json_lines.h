// json_lines: the lines of a JSON-lines file (metrics.jsonl), each parsed; an absent file gives none.
#pragma once
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace linea::testing {

inline std::vector<nlohmann::json> json_lines(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

}  // namespace linea::testing
