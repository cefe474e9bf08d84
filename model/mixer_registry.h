// The mixer registry: every mixer family, and the one list of mixer names. Model config, Block,
// `linea params`, `linea mixer`, bench_memory, bench_train and the test fixtures ask it; nothing
// outside a family's folder decides by mixer kind.
//
// The families are listed in model/mixers/families.h, one line each (an explicit list rather than
// static registrars, which the linker drops from a static library).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "model/mixer_family.h"

namespace linea {

// The families, in the order of model/mixers/families.h.
const std::vector<const MixerFamily*>& mixer_families();
// Every mixer name, family by family in that order (deltanet, gdn, kda, gdn2, attention).
const std::vector<std::string>& mixer_names();
// The family of a mixer name; null if no family provides it.
const MixerFamily* find_mixer_family(std::string_view mixer);
// The same, throwing std::invalid_argument "unknown mixer 'NAME'; expected one of …" instead.
const MixerFamily& mixer_family(std::string_view mixer);

// "a, b or c": names joined for messages.
std::string join_names(const std::vector<std::string>& names, std::string_view last_separator);

}  // namespace linea
