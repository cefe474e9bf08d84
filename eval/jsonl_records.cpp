#include "eval/jsonl_records.h"

#include <fstream>
#include <stdexcept>

namespace linea::eval {

void JsonlRecord::fail(const std::string& name, const std::string& what) const {
  throw std::runtime_error(file + ":" + std::to_string(line) + ": field \"" + name + "\": " + what);
}

const nlohmann::json& JsonlRecord::field(const std::string& name) const {
  const auto it = object.find(name);
  if (it == object.end()) fail(name, "missing");
  return *it;
}

std::string JsonlRecord::string(const std::string& name) const {
  const nlohmann::json& v = field(name);
  if (!v.is_string()) fail(name, "expected a string, got " + v.dump());
  return v.get<std::string>();
}

int64_t JsonlRecord::integer(const std::string& name) const {
  const nlohmann::json& v = field(name);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (!s.empty() && s.size() < 18 && s.find_first_not_of("0123456789") == std::string::npos) return std::stoll(s);
  }
  fail(name, "expected an integer, got " + v.dump());
}

std::vector<std::string> JsonlRecord::strings(const std::string& name) const {
  const nlohmann::json& v = field(name);
  if (!v.is_array() || v.empty()) fail(name, "expected a non-empty array of strings, got " + v.dump());
  std::vector<std::string> out;
  for (const nlohmann::json& s : v) {
    if (!s.is_string()) fail(name, "expected a non-empty array of strings, got " + v.dump());
    out.push_back(s.get<std::string>());
  }
  return out;
}

std::vector<std::string> JsonlRecord::nested_strings(const std::string& outer, const std::string& inner) const {
  const nlohmann::json& v = field(outer);
  if (!v.is_object()) fail(outer, "expected an object with a \"" + inner + "\" array, got " + v.dump());
  JsonlRecord nested{file, line, v};
  try {
    return nested.strings(inner);
  } catch (const std::runtime_error&) {
    fail(outer + "." + inner, "expected a non-empty array of strings, got " + v.value(inner, nlohmann::json()).dump());
  }
}

std::vector<JsonlRecord> read_jsonl(const std::filesystem::path& file, int64_t limit) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error(file.string() + ": cannot open (missing or unreadable)");
  std::vector<JsonlRecord> records;
  std::string text;
  for (int64_t line = 1; std::getline(in, text) && (limit <= 0 || int64_t(records.size()) < limit); ++line) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json object = nlohmann::json::parse(text, nullptr, false);
    if (object.is_discarded() || !object.is_object()) {
      throw std::runtime_error(file.string() + ":" + std::to_string(line) + ": expected a JSON object on the line");
    }
    records.push_back({file.string(), line, std::move(object)});
  }
  if (records.empty()) throw std::runtime_error(file.string() + ": no records (expected JSON lines)");
  return records;
}

}  // namespace linea::eval
