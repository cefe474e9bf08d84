// Flags: the options of one subcommand, `--name VALUE`, `--name=VALUE` or a bare `--switch`, and the
// positional words in order. Parsing checks every option against the declared ones; getters check
// types and ranges. Every error is a std::invalid_argument naming the option ("--slots: expected an
// integer in [1, 100000], got \"x\"").
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace linea::cli {

class Flags {
 public:
  // argv[0] is the command name. `valued` options take a value; `switches` do not.
  Flags(int argc, char** argv, const std::set<std::string>& valued, const std::set<std::string>& switches);

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::optional<std::string> get(const std::string& name) const;
  std::string string(const std::string& name, const std::string& fallback) const;
  int64_t integer(const std::string& name, int64_t fallback, int64_t min, int64_t max) const;
  double number(const std::string& name, double fallback, double min, double max) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

}  // namespace linea::cli
