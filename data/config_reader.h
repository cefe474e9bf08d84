// ConfigReader: a TOML configuration shared by every component (model, train, data, optim, run).
//
// Load a file (toml++), apply command-line overrides `section.key=value` (value parsed as a TOML
// literal; anything that is not one, e.g. `3:1` or `gdn`, is taken as a bare string), then let each
// component read its own table through a ConfigSection. Getters are typed, take a default or are
// required, check ranges, and record which keys were read; check_unknown_keys() then reports every
// key nobody read. Every error is a std::invalid_argument of the form
//   "FILE: model.layers: expected an integer, got a string"
//   "FILE: unknown key 'model.d_modle' (did you mean 'model.d_model'?)"
// resolved() holds every key that was read with the value actually used (file, override or default),
// so a run can record its complete configuration.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace linea {

class ConfigSection;

class ConfigReader {
 public:
  // Parses the file, then applies the overrides in order.
  static ConfigReader from_file(const std::string& path, const std::vector<std::string>& overrides = {});
  // Parses TOML text; `source` names it in error messages (e.g. a file name).
  static ConfigReader from_string(std::string_view text, std::string source,
                                  const std::vector<std::string>& overrides = {});

  ConfigReader(ConfigReader&&) noexcept;
  ConfigReader& operator=(ConfigReader&&) noexcept;
  ~ConfigReader();

  // `section.key=value`; the key path may be any depth (`model.linear.heads=4`).
  void apply_override(std::string_view assignment);

  // The table at a dotted path ("model", "model.linear"); it may be absent (then every getter
  // returns its default).
  ConfigSection section(std::string_view path);

  // Throws naming every key (under `sections`, or anywhere when empty) that no getter read.
  void check_unknown_keys(const std::vector<std::string>& sections = {}) const;

  const std::string& source() const { return source_; }
  // Every key read so far with the value used, as a TOML document.
  std::string resolved() const;

 private:
  friend class ConfigSection;
  struct Tables;  // the parsed and the resolved toml::table (kept out of this header)
  ConfigReader(std::unique_ptr<Tables> tables, std::string source);
  [[noreturn]] void fail(const std::string& dotted, const std::string& message) const;

  std::string source_;
  std::unique_ptr<Tables> tables_;
  std::set<std::string> read_;                     // dotted keys some getter asked for
  std::map<std::string, std::string> overridden_;  // dotted key → the override that set it
};

// A view of one table of a ConfigReader; keys are relative to it.
class ConfigSection {
 public:
  static constexpr int64_t kNoMin = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();

  const std::string& path() const { return path_; }
  std::string key_path(std::string_view key) const;  // "model" + "layers" → "model.layers"
  ConfigSection section(std::string_view name) const;
  bool has(std::string_view key) const;
  bool is_array(std::string_view key) const;

  // Integers in [min, max].
  int64_t integer(std::string_view key, int64_t fallback, int64_t min = kNoMin, int64_t max = kNoMax);
  int64_t required_integer(std::string_view key, int64_t min = kNoMin, int64_t max = kNoMax);
  // Floats (an integer literal is accepted) in [min, max].
  double number(std::string_view key, double fallback, double min = -std::numeric_limits<double>::infinity(),
                double max = std::numeric_limits<double>::infinity());
  bool boolean(std::string_view key, bool fallback);
  std::string string(std::string_view key, std::string fallback);
  std::string required_string(std::string_view key);
  // A name (of a run, a file...): a string, or an integer taken as its digits (run.name=123 on a
  // command line is a name, not a number).
  std::string name(std::string_view key, std::string fallback);
  // A string that must be one of `allowed`.
  std::string choice(std::string_view key, std::string fallback, const std::vector<std::string>& allowed);
  std::string required_choice(std::string_view key, const std::vector<std::string>& allowed);
  // An array of integers, each in [min, max].
  std::vector<int64_t> integer_list(std::string_view key, std::vector<int64_t> fallback, int64_t min = kNoMin,
                                    int64_t max = kNoMax);
  // An array of strings.
  std::vector<std::string> string_list(std::string_view key, std::vector<std::string> fallback);

  // Throws "SOURCE: PATH.KEY: message" (for checks a getter cannot make, e.g. between two keys).
  [[noreturn]] void fail(std::string_view key, const std::string& message) const;

 private:
  friend class ConfigReader;
  ConfigSection(ConfigReader* reader, std::string path) : reader_(reader), path_(std::move(path)) {}
  // Marks `key` read and returns its full dotted path.
  std::string touch(std::string_view key) const;

  ConfigReader* reader_;
  std::string path_;
};

}  // namespace linea
