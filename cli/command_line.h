// CommandLine: the words one subcommand accepts, declared, then parsed. A word that begins with
// `--` is an option: `--name VALUE` or `--name=VALUE` for one that takes a value (given twice, the
// last counts; a list option keeps every value in order), a bare `--name` for a flag; `--help` or
// `-h` asks for the usage. Every other word is positional, kept in order.
//
// Errors name the option and what was expected, as a CommandLine::UsageError (a
// std::invalid_argument; linea's main exits 2 on one): an unknown option, a missing value, a value
// given to a flag ("--json: takes no value"), a count of positional words outside the declared
// range (parse(argc, argv) prints these with the usage and returns 2); a getter's bad value
// ("--slots: expected an integer in [1, 100000], got \"x\""), a required option absent (thrown).
// Asking a getter for an option that was not declared is a std::logic_error (a bug).
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace linea::cli {

class CommandLine {
 public:
  struct UsageError : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
  };
  static constexpr size_t kAny = std::numeric_limits<size_t>::max();  // no upper bound on positional words

  // command: as in `linea COMMAND` (for messages); usage: the --help text.
  CommandLine(std::string command, std::string usage);

  // Declarations (before parsing). By default no option and no positional word is accepted.
  CommandLine& option(const std::string& name);  // takes a value
  CommandLine& option(std::initializer_list<std::string> names);
  CommandLine& list(const std::string& name);  // takes a value, may be given again: every value counts
  CommandLine& flag(const std::string& name);  // takes none
  CommandLine& positional(size_t min, size_t max);
  // Appended to the unknown-option error (e.g. how settings are given instead).
  CommandLine& unknown_option_hint(std::string hint);

  // Parses argv[1..argc) (argv[0] is the command's name). Returns the exit code when the command
  // is done already: 0 after printing the usage on stdout (--help), 2 after printing a UsageError
  // and the usage on stderr; nullopt when it should go on. Other errors are thrown.
  std::optional<int> parse(int argc, char** argv);
  // The same without printing: throws every error, UsageError included; help() tells of --help.
  void read(const std::vector<std::string>& words);
  bool help() const { return help_; }
  const std::string& usage() const { return usage_; }

  // Getters (after parsing).
  bool has(const std::string& name) const;
  std::optional<std::string> get(const std::string& name) const;
  std::string string(const std::string& name, const std::string& fallback) const;
  // One of `choices` (e.g. --format hf): "--NAME: expected a, b or c, got \"x\"" otherwise.
  std::string choice(const std::string& name, const std::string& fallback,
                     const std::vector<std::string>& choices) const;
  int64_t integer(const std::string& name, int64_t fallback, int64_t min = std::numeric_limits<int64_t>::min(),
                  int64_t max = std::numeric_limits<int64_t>::max()) const;
  // A finite number in [min, max].
  double number(const std::string& name, double fallback, double min = -std::numeric_limits<double>::max(),
                double max = std::numeric_limits<double>::max()) const;
  // Every value of a list option, in order (empty when none was given).
  const std::vector<std::string>& all(const std::string& name) const;
  // Throws "missing --a, --b (see linea COMMAND --help)" naming every one of `names` not given.
  void require(const std::vector<std::string>& names) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  enum class Kind { value, list, flag };
  Kind kind_of(const std::string& name) const;  // std::logic_error for an undeclared name
  void check_positional_count() const;

  std::string command_, usage_, unknown_hint_;
  std::map<std::string, Kind> declared_;
  size_t min_positional_ = 0, max_positional_ = 0;
  bool help_ = false;
  std::map<std::string, std::vector<std::string>> values_;  // every value given, in order ("" for a flag)
  std::vector<std::string> positional_;
};

}  // namespace linea::cli
