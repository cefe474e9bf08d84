#include "cli/command_line.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <type_traits>
#include <utility>

namespace linea::cli {
namespace {

std::string count_of(size_t n) {
  return std::to_string(n) + (n == 1 ? " positional argument" : " positional arguments");
}

// "an integer in [1, 8]", "an integer ≥ 0", "an integer": the range the caller gave, if any.
template <class T>
std::string expected_in(const char* what, T min, T max) {
  const bool low = min != std::numeric_limits<T>::lowest(), high = max != std::numeric_limits<T>::max();
  const auto text = [](T v) {
    if constexpr (std::is_integral_v<T>) {
      return std::to_string(v);
    } else {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", v);
      return std::string(buf);
    }
  };
  if (low && high) return std::string(what) + " in [" + text(min) + ", " + text(max) + "]";
  if (low) return std::string(what) + " ≥ " + text(min);
  if (high) return std::string(what) + " ≤ " + text(max);
  return what;
}

}  // namespace

CommandLine::CommandLine(std::string command, std::string usage)
    : command_(std::move(command)), usage_(std::move(usage)) {}

CommandLine& CommandLine::option(const std::string& name) {
  declared_[name] = Kind::value;
  return *this;
}

CommandLine& CommandLine::option(std::initializer_list<std::string> names) {
  for (const std::string& name : names) option(name);
  return *this;
}

CommandLine& CommandLine::list(const std::string& name) {
  declared_[name] = Kind::list;
  return *this;
}

CommandLine& CommandLine::flag(const std::string& name) {
  declared_[name] = Kind::flag;
  return *this;
}

CommandLine& CommandLine::positional(size_t min, size_t max) {
  min_positional_ = min;
  max_positional_ = max;
  return *this;
}

CommandLine& CommandLine::unknown_option_hint(std::string hint) {
  unknown_hint_ = std::move(hint);
  return *this;
}

std::optional<int> CommandLine::parse(int argc, char** argv) {
  try {
    read(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "linea %s: error: %s\n\n%s", command_.c_str(), e.what(), usage_.c_str());
    return 2;
  }
  if (help_) {
    std::fputs(usage_.c_str(), stdout);
    return 0;
  }
  return std::nullopt;
}

void CommandLine::read(const std::vector<std::string>& words) {
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word == "--help" || word == "-h") {
      help_ = true;
      return;
    }
    if (word.compare(0, 2, "--") != 0) {
      positional_.push_back(word);
      continue;
    }
    const size_t eq = word.find('=');
    const std::string name = word.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const auto declared = declared_.find(name);
    if (declared == declared_.end()) {
      throw UsageError("unknown option --" + name + (unknown_hint_.empty() ? "" : ": " + unknown_hint_) +
                       " (see linea " + command_ + " --help)");
    }
    std::vector<std::string>& values = values_[name];
    if (declared->second == Kind::flag) {
      if (eq != std::string::npos) throw UsageError("--" + name + ": takes no value");
      values = {""};
      continue;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = word.substr(eq + 1);
    } else if (i + 1 < words.size()) {
      value = words[++i];
    } else {
      throw UsageError("--" + name + ": expected a value after it");
    }
    if (declared->second == Kind::value) values.clear();
    values.push_back(std::move(value));
  }
  check_positional_count();
}

void CommandLine::check_positional_count() const {
  const size_t n = positional_.size();
  if (n >= min_positional_ && n <= max_positional_) return;
  if (max_positional_ == 0) throw UsageError("expected no positional arguments, got \"" + positional_.front() + "\"");
  const std::string expected = min_positional_ == max_positional_ ? count_of(min_positional_)
                               : max_positional_ == kAny
                                   ? "at least " + count_of(min_positional_)
                                   : std::to_string(min_positional_) + " to " + count_of(max_positional_);
  throw UsageError("expected " + expected + ", got " + std::to_string(n));
}

CommandLine::Kind CommandLine::kind_of(const std::string& name) const {
  const auto it = declared_.find(name);
  if (it == declared_.end()) throw std::logic_error("linea " + command_ + ": --" + name + " was not declared");
  return it->second;
}

bool CommandLine::has(const std::string& name) const {
  kind_of(name);
  return values_.count(name) > 0;
}

std::optional<std::string> CommandLine::get(const std::string& name) const {
  if (!has(name)) return std::nullopt;
  return values_.at(name).back();
}

std::string CommandLine::string(const std::string& name, const std::string& fallback) const {
  return get(name).value_or(fallback);
}

std::string CommandLine::choice(const std::string& name, const std::string& fallback,
                                const std::vector<std::string>& choices) const {
  const std::string value = string(name, fallback);
  std::string expected;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (choices[i] == value) return value;
    expected += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  }
  throw UsageError("--" + name + ": expected " + expected + ", got \"" + value + "\"");
}

int64_t CommandLine::integer(const std::string& name, int64_t fallback, int64_t min, int64_t max) const {
  const auto text = get(name);
  if (!text) return fallback;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size() || v < min || v > max)
    throw UsageError("--" + name + ": expected " + expected_in("an integer", min, max) + ", got \"" + *text + "\"");
  return v;
}

double CommandLine::number(const std::string& name, double fallback, double min, double max) const {
  const auto text = get(name);
  if (!text) return fallback;
  double v = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size() || !std::isfinite(v) || v < min || v > max)
    throw UsageError("--" + name + ": expected " + expected_in("a number", min, max) + ", got \"" + *text + "\"");
  return v;
}

const std::vector<std::string>& CommandLine::all(const std::string& name) const {
  static const std::vector<std::string> none;
  if (kind_of(name) != Kind::list) throw std::logic_error("linea " + command_ + ": --" + name + " is not a list");
  const auto it = values_.find(name);
  return it == values_.end() ? none : it->second;
}

void CommandLine::require(const std::vector<std::string>& names) const {
  std::string missing;
  for (const std::string& name : names) {
    if (!has(name)) missing += (missing.empty() ? "--" : ", --") + name;
  }
  if (!missing.empty()) throw UsageError("missing " + missing + " (see linea " + command_ + " --help)");
}

}  // namespace linea::cli
