// The manifest of a shard directory: `manifest.json` beside the shards, written last by `prepare`.
//   {
//     "format": "linea-shards", "format_version": 1,
//     "tokenizer": {"kind": "sentencepiece" | "gpt2-bpe", "path": "<relative to the directory>"},
//     "vocab_size": 4096, "eos_id": 2,
//     "documents": "eos-precedes",          // EOS is written before every document (as llm.c does)
//     "checksum": "crc32-zlib-whole-file",  // see shard_format.h
//     "shards": [{"file": "corpus_val_000000.bin", "split": "val", "tokens": 1234,
//                 "crc32": "0x1a2b3c4d"}, ...]
//   }
// A directory of plain llm.c output (fineweb_train_*.bin, fineweb_val_*.bin, no manifest) is
// described by infer_llmc_manifest(): split from each file name, counts from the headers, no
// checksums, vocabulary size and EOS id supplied by the caller.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace linea::data {

inline constexpr const char* kManifestFile = "manifest.json";

enum class Split : uint8_t { train, val };
std::string_view split_name(Split split);

struct ManifestShard {
  std::string file;  // relative to the directory
  Split split = Split::train;
  int64_t tokens = 0;
  std::optional<uint32_t> crc32;  // absent for inferred llm.c directories
};

struct Manifest {
  TokenizerSpec tokenizer;  // kind empty when unknown (llm.c directory)
  int64_t vocab_size = 0;
  int32_t eos_id = -1;
  std::vector<ManifestShard> shards;

  std::string to_json_text() const;
  // Throws std::runtime_error naming `source`, the field and what was expected.
  static Manifest from_json_text(std::string_view text, const std::string& source);
  // Reads <dir>/manifest.json.
  static Manifest load(const std::filesystem::path& dir);
  // Writes <dir>/manifest.json atomically.
  void save(const std::filesystem::path& dir) const;
};

// Describes a directory of llm.c shards with no manifest: every *.bin file whose name contains
// "train" or "val" (sorted by name). Throws naming the directory when there is no train shard, or
// naming a .bin file whose split cannot be told from its name.
Manifest infer_llmc_manifest(const std::filesystem::path& dir, int64_t vocab_size, int32_t eos_id);

}  // namespace linea::data
