#include "data/manifest.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "data/atomic_file.h"
#include "data/shard_format.h"

namespace linea::data {

namespace {

constexpr const char* kFormat = "linea-shards";
constexpr int kFormatVersion = 1;
constexpr const char* kDocuments = "eos-precedes";
constexpr const char* kChecksum = "crc32-zlib-whole-file";

using nlohmann::json;

// Typed access to manifest fields with errors that name the file and the field.
class FieldReader {
 public:
  explicit FieldReader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& expected) const {
    throw std::runtime_error("manifest " + source_ + ": field '" + field + "': expected " + expected);
  }
  const json& get(const json& object, const std::string& key, const std::string& field) const {
    if (!object.is_object() || !object.contains(key)) fail(field, "to be present");
    return object.at(key);
  }
  std::string string(const json& object, const std::string& key, const std::string& field) const {
    const json& v = get(object, key, field);
    if (!v.is_string()) fail(field, "a string");
    return v.get<std::string>();
  }
  int64_t integer(const json& object, const std::string& key, const std::string& field, int64_t lo, int64_t hi) const {
    const json& v = get(object, key, field);
    const std::string range = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    if (!v.is_number_integer()) fail(field, range);
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) fail(field, range + ", got " + std::to_string(x));
    return x;
  }

 private:
  std::string source_;
};

}  // namespace

std::string_view split_name(Split split) { return split == Split::train ? "train" : "val"; }

std::string Manifest::to_json_text() const {
  json shard_list = json::array();
  for (const auto& s : shards) {
    json entry = {{"file", s.file}, {"split", split_name(s.split)}, {"tokens", s.tokens}};
    if (s.crc32) entry["crc32"] = crc32_hex(*s.crc32);
    shard_list.push_back(std::move(entry));
  }
  const json doc = {{"format", kFormat},
                    {"format_version", kFormatVersion},
                    {"tokenizer", {{"kind", tokenizer.kind}, {"path", tokenizer.path}}},
                    {"vocab_size", vocab_size},
                    {"eos_id", eos_id},
                    {"documents", kDocuments},
                    {"checksum", kChecksum},
                    {"shards", std::move(shard_list)}};
  return doc.dump(2) + "\n";
}

Manifest Manifest::from_json_text(std::string_view text, const std::string& source) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw std::runtime_error("manifest " + source + ": not valid JSON (" + e.what() + ")");
  }
  const FieldReader r(source);
  if (!doc.is_object()) r.fail("(top level)", "a JSON object");
  if (r.string(doc, "format", "format") != kFormat) r.fail("format", std::string("\"") + kFormat + "\"");
  r.integer(doc, "format_version", "format_version", kFormatVersion, kFormatVersion);
  if (r.string(doc, "documents", "documents") != kDocuments) r.fail("documents", std::string("\"") + kDocuments + "\"");
  if (r.string(doc, "checksum", "checksum") != kChecksum) r.fail("checksum", std::string("\"") + kChecksum + "\"");

  Manifest m;
  const json& tok = r.get(doc, "tokenizer", "tokenizer");
  m.tokenizer.kind = r.string(tok, "kind", "tokenizer.kind");
  m.tokenizer.path = r.string(tok, "path", "tokenizer.path");
  if (!m.tokenizer.kind.empty() && !is_known_tokenizer_kind(m.tokenizer.kind)) {
    r.fail("tokenizer.kind", known_tokenizer_kinds() + ", got \"" + m.tokenizer.kind + "\"");
  }
  m.vocab_size = r.integer(doc, "vocab_size", "vocab_size", 1, INT32_MAX);
  m.eos_id = static_cast<int32_t>(r.integer(doc, "eos_id", "eos_id", 0, m.vocab_size - 1));

  const json& list = r.get(doc, "shards", "shards");
  if (!list.is_array()) r.fail("shards", "an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = "shards[" + std::to_string(i) + "]";
    ManifestShard s;
    s.file = r.string(list[i], "file", at + ".file");
    if (s.file.empty() || std::filesystem::path(s.file).is_absolute() || s.file.find("..") != std::string::npos) {
      r.fail(at + ".file", "a file name inside the directory, got \"" + s.file + "\"");
    }
    const std::string split = r.string(list[i], "split", at + ".split");
    if (split == "train") {
      s.split = Split::train;
    } else if (split == "val") {
      s.split = Split::val;
    } else {
      r.fail(at + ".split", "\"train\" or \"val\", got \"" + split + "\"");
    }
    s.tokens = r.integer(list[i], "tokens", at + ".tokens", 0, kMaxShardTokens);
    if (list[i].contains("crc32")) {
      const std::string hex = r.string(list[i], "crc32", at + ".crc32");
      size_t used = 0;
      unsigned long value = 0;
      try {
        value = std::stoul(hex, &used, 16);
      } catch (const std::exception&) {
        used = 0;
      }
      if (hex.size() != 10 || hex.rfind("0x", 0) != 0 || used != hex.size() || value > UINT32_MAX) {
        r.fail(at + ".crc32", "\"0x\" and 8 hex digits, got \"" + hex + "\"");
      }
      s.crc32 = static_cast<uint32_t>(value);
    }
    m.shards.push_back(std::move(s));
  }
  return m;
}

Manifest Manifest::load(const std::filesystem::path& dir) {
  const auto path = dir / kManifestFile;
  return from_json_text(read_file(path), path.string());
}

void Manifest::save(const std::filesystem::path& dir) const {
  write_file_atomically(dir / kManifestFile, to_json_text());
}

Manifest infer_llmc_manifest(const std::filesystem::path& dir, int64_t vocab_size, int32_t eos_id) {
  if (!std::filesystem::is_directory(dir)) {
    throw std::runtime_error(
        "shard directory " + dir.string() +
        (std::filesystem::exists(dir) ? " is not a directory (expected a directory of shards)" : " does not exist"));
  }
  if (vocab_size <= 0) {
    throw std::invalid_argument("shard directory " + dir.string() +
                                " has no manifest.json: the vocabulary size must be given (got " +
                                std::to_string(vocab_size) + ")");
  }
  if (eos_id < 0 || eos_id >= vocab_size) {
    throw std::invalid_argument("shard directory " + dir.string() +
                                " has no manifest.json: the EOS id must be in [0, " + std::to_string(vocab_size) +
                                "), got " + std::to_string(eos_id));
  }
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".bin") files.push_back(entry.path().filename());
  }
  std::sort(files.begin(), files.end());
  Manifest m;
  m.vocab_size = vocab_size;
  m.eos_id = eos_id;
  for (const auto& file : files) {
    ManifestShard s;
    s.file = file;
    const bool train = file.find("train") != std::string::npos;
    const bool val = file.find("val") != std::string::npos;
    if (train == val) {
      throw std::runtime_error("shard " + (dir / file).string() +
                               ": cannot tell its split from the name (expected exactly one of \"train\" or "
                               "\"val\" in it), and the directory has no manifest.json");
    }
    s.split = train ? Split::train : Split::val;
    s.tokens = ShardReader(dir / file).num_tokens();
    m.shards.push_back(std::move(s));
  }
  if (std::none_of(m.shards.begin(), m.shards.end(), [](const auto& s) { return s.split == Split::train; })) {
    throw std::runtime_error("shard directory " + dir.string() + " has no manifest.json and no *train*.bin shard");
  }
  return m;
}

}  // namespace linea::data
