// Damages checkpoints as the fault tests do: one byte flipped 64 bytes before the end of a rank
// file (inside its data, so that its checksum no longer matches).
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>

namespace linea::testing {

inline void flip_byte_near_end(const std::filesystem::path& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(0, std::ios::end);
  const auto size = static_cast<int64_t>(f.tellg());
  char byte = 0;
  f.seekg(size - 64);
  f.read(&byte, 1);
  f.seekp(size - 64);
  byte = static_cast<char>(byte ^ 0x5a);
  f.write(&byte, 1);
}

// Flips that byte in every rank file (*.h5) of the checkpoint directory `directory`.
inline void damage_checkpoint(const std::filesystem::path& directory) {
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    if (entry.path().extension() == ".h5") flip_byte_near_end(entry.path());
  }
}

}  // namespace linea::testing
