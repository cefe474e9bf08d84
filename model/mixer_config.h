// MixerConfig: the settings of one mixer of a model (say "gdn": heads, key and value widths, conv,
// gates), an object of its family's type (DeltaRuleConfig, AttentionConfig, …). A model holds one
// per mixer name its layers use, and builds every layer of that mixer from it.
//
// `mixer` is the mixer's name; `section` the dotted table it is read from: "model.<mixer>" when the
// config has that table, else the family's shared table ("model.linear", "model.attention"). Error
// messages name the keys under `section`.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace linea {

class ConfigSection;

// Reports a bad field of a config: throws std::invalid_argument "FILE: SECTION.KEY: message"
// through the table it was read from (which adds any command-line override that set it), or
// "ModelConfig: SECTION.KEY: message" for a config built in code (table null).
struct ConfigFieldError {
  const ConfigSection* table = nullptr;
  std::string section;  // the dotted path of the table ("model", "model.linear")
  [[noreturn]] void operator()(std::string_view key, const std::string& message) const;
  // Throws unless value ≥ min ("expected an integer >= MIN, got VALUE").
  void at_least(std::string_view key, int64_t value, int64_t min) const;
  // d_model / heads, the per-head width a config left out (its key: width_key); throws at "heads"
  // unless heads divides d_model ("d_model D is not divisible by N heads; set SECTION.WIDTH_KEY").
  int64_t d_model_per_head(int64_t d_model, int64_t heads, std::string_view width_key) const;
};

class MixerConfig {
 public:
  virtual ~MixerConfig() = default;
  virtual std::unique_ptr<MixerConfig> clone() const = 0;
  // Reads every key of the mixer's table (each optional; absent keys keep their defaults).
  virtual void read(ConfigSection& table) = 0;
  // Fills the derived defaults (widths from d_model, …) and checks every field; a bad one goes to
  // fail(key) with the key relative to `section`. Calling it again changes nothing.
  virtual void resolve(int64_t d_model, const ConfigFieldError& fail) = 0;

  std::string mixer;
  std::string section;

 protected:
  MixerConfig(std::string mixer_name, std::string section_path)
      : mixer(std::move(mixer_name)), section(std::move(section_path)) {}
  MixerConfig(const MixerConfig&) = default;
  MixerConfig& operator=(const MixerConfig&) = default;
};

// A family's config type T derives from MixerConfigOf<T>, which gives it clone(), and names its
// mixer and section through MixerConfigOf's constructor.
template <class T>
class MixerConfigOf : public MixerConfig {
 public:
  std::unique_ptr<MixerConfig> clone() const override { return std::make_unique<T>(static_cast<const T&>(*this)); }

 protected:
  MixerConfigOf(std::string mixer_name, std::string section_path)
      : MixerConfig(std::move(mixer_name), std::move(section_path)) {}
};

}  // namespace linea
