// Small llm.c-format shards with structure a tiny model learns within a few steps, for trainer
// tests: documents (EOS = 0 first) whose tokens follow a linear congruence over a vocabulary of
// kSyntheticVocab ids.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/shard_format.h"

namespace linea::testing {

inline constexpr int64_t kSyntheticVocab = 64;

inline std::vector<int32_t> synthetic_tokens(int64_t n, uint32_t seed) {
  std::vector<int32_t> ids;
  uint32_t x = seed;
  while (static_cast<int64_t>(ids.size()) < n) {
    ids.push_back(0);
    x = x * 1103515245u + 12345u;
    int32_t t = 1 + static_cast<int32_t>((x >> 16) % (kSyntheticVocab - 1));
    const int64_t length = 20 + (x >> 8) % 40;
    for (int64_t i = 0; i < length; ++i) {
      ids.push_back(t);
      t = 1 + (t * 7 + 3) % (kSyntheticVocab - 1);
    }
  }
  ids.resize(static_cast<size_t>(n));
  return ids;
}

// A train shard of 20000 tokens and a val shard of 3000 in `dir`; returns the directory.
inline std::string make_synthetic_data(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  data::write_shard(dir / "fineweb_train_000000.bin", synthetic_tokens(20000, 1), data::TokenWidth::u16);
  data::write_shard(dir / "fineweb_val_000000.bin", synthetic_tokens(3000, 2), data::TokenWidth::u16);
  return dir.string();
}

}  // namespace linea::testing
