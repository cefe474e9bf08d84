#include "worker/config_difference.h"

#include <toml++/toml.h>

#include <charconv>
#include <map>
#include <set>
#include <sstream>

namespace linea {

namespace {

// Every leaf of `table` (arrays are leaves) as "dotted.key" → its TOML text.
void flatten(const toml::table& table, const std::string& prefix, std::map<std::string, std::string>& out) {
  for (const auto& [key, node] : table) {
    const std::string dotted = prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    if (const toml::table* inner = node.as_table()) {
      flatten(*inner, dotted, out);
      continue;
    }
    if (const auto* number = node.as_floating_point()) {  // the shortest text that reads back the same
      char text[32];
      const auto end = std::to_chars(text, text + sizeof text, number->get()).ptr;
      out[dotted] = std::string(text, end);
      continue;
    }
    std::ostringstream text;
    text << toml::toml_formatter(node);
    out[dotted] = text.str();
  }
}

}  // namespace

std::vector<std::string> config_differences(std::string_view before, std::string_view after) {
  std::map<std::string, std::string> a, b;
  try {
    flatten(toml::parse(before), "", a);
    flatten(toml::parse(after), "", b);
  } catch (const toml::parse_error& e) {
    return {std::string("(a configuration does not parse: ") + std::string(e.description()) + ")"};
  }
  std::vector<std::string> differences;
  auto show = [](const std::map<std::string, std::string>& m, const std::string& key) {
    const auto it = m.find(key);
    return it == m.end() ? std::string("(absent)") : it->second;
  };
  std::set<std::string> keys;
  for (const auto& [key, value] : a) keys.insert(key);
  for (const auto& [key, value] : b) keys.insert(key);
  for (const std::string& key : keys) {
    const std::string x = show(a, key), y = show(b, key);
    if (x != y) differences.push_back(key + ": " + x + " → " + y);
  }
  return differences;
}

}  // namespace linea
