// JsonFields: typed, validated access to the fields of one JSON object that came from the network
// or from a file. Every getter checks the type and range; every failure is a std::invalid_argument
// "<path>.<field>: expected <what>, got <value>", where `path` names the object being read (for
// example "submit.runs[2]"), so a user can find the offending field. Values in messages are
// truncated, so a hostile input cannot make an error message large.
#pragma once
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace linea::coordinator {

class JsonFields {
 public:
  // Throws unless `object` is a JSON object.
  JsonFields(const nlohmann::json& object, std::string path);

  const std::string& path() const { return path_; }
  std::string field_path(std::string_view key) const;
  bool has(std::string_view key) const;

  // Strings of at most max_bytes bytes (non-empty when required).
  std::string required_string(std::string_view key, size_t max_bytes = 4096) const;
  std::string string(std::string_view key, std::string fallback, size_t max_bytes = 4096) const;
  // Integers in [min, max].
  int64_t required_integer(std::string_view key, int64_t min, int64_t max) const;
  int64_t integer(std::string_view key, int64_t fallback, int64_t min, int64_t max) const;
  // Finite numbers (integers accepted).
  double required_number(std::string_view key) const;
  std::optional<double> optional_number(std::string_view key) const;
  bool boolean(std::string_view key, bool fallback) const;
  // An array of strings, each of at most max_bytes, with at most max_items items.
  std::vector<std::string> string_list(std::string_view key, size_t max_items, size_t max_bytes = 4096) const;
  // An array (of anything) with at most max_items items; absent → empty.
  const nlohmann::json& array(std::string_view key, size_t max_items) const;
  // A nested object; its path is "<path>.<key>".
  JsonFields object(std::string_view key) const;
  const nlohmann::json& raw(std::string_view key) const { return object_.at(std::string(key)); }

  [[noreturn]] void fail(std::string_view key, std::string_view expected) const;

 private:
  const nlohmann::json* find(std::string_view key) const;

  const nlohmann::json& object_;
  std::string path_;
};

// A short, printable rendering of a JSON value for error messages.
std::string describe_json_value(const nlohmann::json& value);

}  // namespace linea::coordinator
