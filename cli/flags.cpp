#include "cli/flags.h"

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string_view>

namespace linea::cli {

Flags::Flags(int argc, char** argv, const std::set<std::string>& valued, const std::set<std::string>& switches) {
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.size() < 3 || word.compare(0, 2, "--") != 0) {
      positional_.push_back(word);
      continue;
    }
    const size_t eq = word.find('=');
    const std::string name = word.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    if (switches.count(name)) {
      if (eq != std::string::npos) throw std::invalid_argument("--" + name + ": takes no value");
      values_[name] = "";
    } else if (valued.count(name)) {
      if (eq != std::string::npos) {
        values_[name] = word.substr(eq + 1);
      } else {
        if (i + 1 >= argc) throw std::invalid_argument("--" + name + ": expected a value after it");
        values_[name] = argv[++i];
      }
    } else {
      throw std::invalid_argument("unknown option --" + name + " (see --help)");
    }
  }
}

std::optional<std::string> Flags::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Flags::string(const std::string& name, const std::string& fallback) const {
  return get(name).value_or(fallback);
}

int64_t Flags::integer(const std::string& name, int64_t fallback, int64_t min, int64_t max) const {
  const auto text = get(name);
  if (!text) return fallback;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size() || v < min || v > max)
    throw std::invalid_argument("--" + name + ": expected an integer in [" + std::to_string(min) + ", " +
                                std::to_string(max) + "], got \"" + *text + "\"");
  return v;
}

double Flags::number(const std::string& name, double fallback, double min, double max) const {
  const auto text = get(name);
  if (!text) return fallback;
  double v = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size() || !std::isfinite(v) || v < min || v > max)
    throw std::invalid_argument("--" + name + ": expected a number in [" + std::to_string(min) + ", " +
                                std::to_string(max) + "], got \"" + *text + "\"");
  return v;
}

}  // namespace linea::cli
