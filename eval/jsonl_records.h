// JsonlRecords: the objects of a JSONL file (one JSON object a line, blank lines skipped), each
// with the line it came from, and field getters whose errors name the file, the line and the
// field ("data/piqa/validation.jsonl:12: field \"label\": expected an integer, got \"x\"").
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace linea::eval {

struct JsonlRecord {
  std::string file;
  int64_t line = 0;
  nlohmann::json object;

  // "FILE:LINE: field \"NAME\": WHAT" as a std::runtime_error.
  [[noreturn]] void fail(const std::string& field, const std::string& what) const;
  const nlohmann::json& field(const std::string& name) const;  // present (any type)
  std::string string(const std::string& name) const;
  int64_t integer(const std::string& name) const;                   // a JSON integer or a string of digits ("1")
  std::vector<std::string> strings(const std::string& name) const;  // an array of strings
  // A field inside an object field: choices.text.
  std::vector<std::string> nested_strings(const std::string& outer, const std::string& inner) const;
};

// Reads at most `limit` records (0: all). A missing file, a line that is not a JSON object, or a
// file with no record throws std::runtime_error naming the file (and the line).
std::vector<JsonlRecord> read_jsonl(const std::filesystem::path& file, int64_t limit = 0);

}  // namespace linea::eval
