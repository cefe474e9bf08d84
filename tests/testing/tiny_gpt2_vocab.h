// A tiny GPT-2 byte-level BPE vocabulary for tests: ids 0..255 are the byte symbols in byte order,
// then the results of the merges below in merge order, then <|endoftext|> (id 263).
#pragma once
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "data/gpt2_bpe_tokenizer.h"
#include "data/unicode_classes.h"

namespace linea::testing {

inline std::string gpt2_byte_symbol(int byte) {
  std::string s;
  data::append_utf8(data::gpt2_byte_to_unicode()[byte], s);
  return s;
}

// Writes dir/vocab.json and dir/merges.txt.
inline void write_tiny_gpt2_vocab(const std::filesystem::path& dir) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[gpt2_byte_symbol(b)] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"\u0120", "t"}, {"h", "e"}, {"\u0120t", "he"}, {"a", "t"}, {"c", "at"}, {"\u0120", "cat"}, {"he", "he"}};
  std::string merges_txt = "#version: 0.2\n";
  int id = 256;
  for (const auto& [a, b] : merges) {
    if (!vocab.contains(a + b)) vocab[a + b] = id++;
    merges_txt += a + " " + b + "\n";
  }
  vocab["<|endoftext|>"] = id;
  std::ofstream(dir / "vocab.json") << vocab.dump();
  std::ofstream(dir / "merges.txt") << merges_txt;
}

}  // namespace linea::testing
