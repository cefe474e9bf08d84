#include "model/mixer_registry.h"

#include <stdexcept>

namespace linea {

#define LINEA_MIXER_FAMILY(folder) const MixerFamily& folder##_family();
#include "model/mixers/families.h"
#undef LINEA_MIXER_FAMILY

const std::vector<const MixerFamily*>& mixer_families() {
#define LINEA_MIXER_FAMILY(folder) &folder##_family(),
  static const std::vector<const MixerFamily*> families = {
#include "model/mixers/families.h"
  };
#undef LINEA_MIXER_FAMILY
  return families;
}

const std::vector<std::string>& mixer_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (const MixerFamily* family : mixer_families()) {
      for (const std::string& mixer : family->mixers()) {
        if (find_mixer_family(mixer) != family) {
          throw std::logic_error("mixer '" + mixer + "' is provided by two families");
        }
        all.push_back(mixer);
      }
    }
    return all;
  }();
  return names;
}

const MixerFamily* find_mixer_family(std::string_view mixer) {
  for (const MixerFamily* family : mixer_families()) {
    for (const std::string& name : family->mixers()) {
      if (name == mixer) return family;
    }
  }
  return nullptr;
}

const MixerFamily& mixer_family(std::string_view mixer) {
  if (const MixerFamily* family = find_mixer_family(mixer)) return *family;
  throw std::invalid_argument("unknown mixer '" + std::string(mixer) + "'; expected one of " +
                              join_names(mixer_names(), ", "));
}

std::string join_names(const std::vector<std::string>& names, std::string_view last_separator) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? std::string(last_separator) : std::string(", ");
    out += names[i];
  }
  return out;
}

}  // namespace linea
