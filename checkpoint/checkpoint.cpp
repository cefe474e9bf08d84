#include "checkpoint/checkpoint.h"

#include <glog/logging.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

#include "checkpoint/durable_file.h"
#include "checkpoint/hdf5_file.h"

namespace linea {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kFormatName = "linea-checkpoint";
constexpr const char* kManifestName = "manifest.json";

std::string rank_file_name(int64_t rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05lld.h5", static_cast<long long>(rank));
  return name;
}

uint32_t crc32_of(const void* data, size_t bytes) {
  return static_cast<uint32_t>(crc32_z(0, static_cast<const Bytef*>(data), bytes));
}

json shape_json(const Shape& shape) { return json(std::vector<int64_t>(shape.begin(), shape.end())); }

// ---- saving -----------------------------------------------------------------------------------

void check_tensor_name(const std::string& name) {
  const auto bad = [&](std::string_view why) {
    throw std::invalid_argument("save_checkpoint: tensor name '" + name + "' " + std::string(why));
  };
  if (name.empty()) bad("is empty");
  if (name.front() == '/' || name.back() == '/' || name.find("//") != name.npos) {
    bad("must not start or end with '/' or contain '//'");
  }
  if (name.find('\0') != name.npos) bad("contains a NUL byte");
  for (size_t begin = 0; begin <= name.size();) {
    const size_t end = std::min(name.find('/', begin), name.size());
    const std::string_view part = std::string_view(name).substr(begin, end - begin);
    if (part == "." || part == "..") bad("must not have '.' or '..' components");
    begin = end + 1;
  }
}

}  // namespace

void validate_checkpoint_state(const CheckpointState& state, int keep_last) {
  const auto bad = [](const std::string& why) { throw std::invalid_argument("save_checkpoint: " + why); };
  if (keep_last < 1) bad("keep_last must be >= 1, got " + std::to_string(keep_last));
  if (state.step < 0) bad("step must be >= 0, got " + std::to_string(state.step));
  if (state.tokens < 0) bad("tokens must be >= 0, got " + std::to_string(state.tokens));
  const CheckpointLayout& l = state.layout;
  if (l.tp < 1 || l.dp < 1 || l.world != l.tp * l.dp) {
    bad("layout must have tp >= 1, dp >= 1 and world = tp * dp, got tp " + std::to_string(l.tp) + ", dp " +
        std::to_string(l.dp) + ", world " + std::to_string(l.world));
  }
  if (!state.data_position.is_object()) bad("data_position must be a JSON object, got " + state.data_position.dump());
  if (!state.rng_states.is_object()) bad("rng_states must be a JSON object, got " + state.rng_states.dump());
  if (!state.trainer_state.is_object()) {
    bad("trainer_state must be a JSON object, got " + state.trainer_state.dump());
  }
  std::set<std::string> names;
  for (const auto& [name, tensor] : state.tensors) {
    check_tensor_name(name);
    if (!names.insert(name).second) bad("tensor name '" + name + "' appears twice");
    if (!tensor.defined()) bad("tensor '" + name + "' is undefined");
  }
  // "a" and "a/b" cannot both be datasets: HDF5 would need "a" to be a group.
  for (const std::string& name : names) {
    for (size_t slash = name.find('/'); slash != name.npos; slash = name.find('/', slash + 1)) {
      if (names.count(name.substr(0, slash))) {
        bad("tensor names '" + name.substr(0, slash) + "' and '" + name + "' collide ('/' makes HDF5 groups)");
      }
    }
  }
}

namespace {

// Writes every tensor into one rank file and returns their manifest entries.
json write_rank_file(const fs::path& path, const CheckpointState& state, int64_t rank) {
  json datasets = json::array();
  Hdf5File file = Hdf5File::create(path);
  file.set_attribute("", "format", kFormatName);
  file.set_attribute("", "format_version", kCheckpointFormatVersion);
  file.set_attribute("", "step", state.step);
  file.set_attribute("", "rank", rank);
  for (const auto& [name, tensor] : state.tensors) {
    const Tensor host = tensor.device() == Device::cpu ? tensor : tensor.clone();
    const std::vector<int64_t> offset(host.ndim(), 0);  // one writer: every tensor whole
    file.write(name, host);
    file.set_attribute(name, "full_shape", std::vector<int64_t>(host.shape()));
    file.set_attribute(name, "offset", offset);
    datasets.push_back({{"name", name},
                        {"file", path.filename().string()},
                        {"dtype", dtype_name(host.dtype())},
                        {"shape", shape_json(host.shape())},
                        {"full_shape", shape_json(host.shape())},
                        {"offset", offset},
                        {"bytes", host.nbytes()},
                        {"crc32", crc32_of(host.raw(), host.nbytes())}});
  }
  file.close();
  fsync_path(path);
  return datasets;
}

}  // namespace

fs::path save_checkpoint(const fs::path& root, const CheckpointState& state, int keep_last) {
  validate_checkpoint_state(state, keep_last);
  // Training that resumed from an older checkpoint, because this step's was damaged, reaches
  // this step again: the damaged one is set aside. A sound one is never replaced.
  const std::vector<CommittedCheckpoint> existing = list_committed_checkpoints(root);
  const auto same_step = std::find_if(existing.begin(), existing.end(),
                                      [&](const CommittedCheckpoint& c) { return c.step == state.step; });
  if (same_step != existing.end()) {
    try {
      load_checkpoint(same_step->directory);
    } catch (const std::exception& e) {
      LOG(WARNING) << "checkpoint '" << same_step->directory.string() << "' is damaged (" << e.what() << ")";
      set_aside_damaged_checkpoint(same_step->directory);
    }
  }
  const fs::path temporary = begin_checkpoint(root, state.step);
  const std::string file_name = rank_file_name(0);
  const json datasets = write_rank_file(temporary / file_name, state, 0);
  const json manifest = {
      {"format", kFormatName},
      {"format_version", kCheckpointFormatVersion},
      {"step", state.step},
      {"tokens", state.tokens},
      {"config", state.config},
      {"data_position", state.data_position},
      {"rng_states", state.rng_states},
      {"trainer_state", state.trainer_state},
      {"layout", {{"tp", state.layout.tp}, {"dp", state.layout.dp}, {"world", state.layout.world}}},
      {"files", {file_name}},
      {"datasets", datasets},
  };
  const std::string manifest_text = manifest.dump(2) + "\n";
  write_file_atomically(temporary / kManifestName, manifest_text);
  const json marker = {{"manifest_bytes", manifest_text.size()},
                       {"manifest_crc32", crc32_of(manifest_text.data(), manifest_text.size())}};
  const fs::path committed = commit_checkpoint(temporary, marker.dump() + "\n");
  prune_checkpoints(root, keep_last);
  return committed;
}

// ---- loading ----------------------------------------------------------------------------------

namespace {

// Typed access to the fields of a JSON object read from `file`, with errors naming both.
class JsonReader {
 public:
  JsonReader(const json& object, const fs::path& file, std::string where)
      : object_(object), file_(file), where_(std::move(where)) {
    if (!object_.is_object()) fail("", "a JSON object", object_);
  }
  const json& at(const std::string& key, const char* expected) const {
    if (!object_.contains(key)) fail(key, expected, json());
    return object_[key];
  }
  int64_t integer(const std::string& key, int64_t minimum = 0) const {
    const json& v = at(key, "an integer");
    const std::string expected = "an integer >= " + std::to_string(minimum);
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX)) fail(key, expected, v);
    if (v.get<int64_t>() < minimum) fail(key, expected, v);
    return v.get<int64_t>();
  }
  std::string string(const std::string& key) const {
    const json& v = at(key, "a string");
    if (!v.is_string()) fail(key, "a string", v);
    return v.get<std::string>();
  }
  const json& object(const std::string& key) const {
    const json& v = at(key, "a JSON object");
    if (!v.is_object()) fail(key, "a JSON object", v);
    return v;
  }
  const json& array(const std::string& key) const {
    const json& v = at(key, "an array");
    if (!v.is_array()) fail(key, "an array", v);
    return v;
  }
  std::vector<int64_t> integers(const std::string& key) const {
    std::vector<int64_t> values;
    for (const json& v : array(key)) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0) fail(key, "an array of integers >= 0", array(key));
      values.push_back(v.get<int64_t>());
    }
    return values;
  }
  [[noreturn]] void fail(const std::string& key, const std::string& expected, const json& got) const {
    std::string text = got.is_null() ? "nothing" : got.dump();
    if (text.size() > 80) text = text.substr(0, 77) + "...";
    throw std::runtime_error(file_.string() + ": " + where_ + (key.empty() ? "" : "field '" + key + "': ") +
                             "expected " + expected + ", found " + text);
  }

 private:
  const json& object_;
  const fs::path& file_;
  std::string where_;
};

DType parse_dtype(const std::string& name, const JsonReader& reader) {
  for (DType d : {DType::f32, DType::f64, DType::bf16, DType::i32, DType::i64}) {
    if (dtype_name(d) == name) return d;
  }
  reader.fail("dtype", "one of f32, f64, bf16, i32, i64", name);
}

// The manifest, after checking it against the CRC32 and size that COMMITTED records.
json read_verified_manifest(const fs::path& directory) {
  const fs::path marker_path = directory / kCommittedMarkerName;
  json marker;
  try {
    marker = json::parse(read_file(marker_path));
  } catch (const json::exception& e) {
    throw std::runtime_error(marker_path.string() + ": not valid JSON (" + e.what() + ")");
  }
  const JsonReader marker_reader(marker, marker_path, "");
  const int64_t expected_bytes = marker_reader.integer("manifest_bytes");
  const int64_t expected_crc = marker_reader.integer("manifest_crc32");

  const fs::path manifest_path = directory / kManifestName;
  const std::string text = read_file(manifest_path);
  const uint32_t crc = crc32_of(text.data(), text.size());
  if (static_cast<int64_t>(text.size()) != expected_bytes || crc != expected_crc) {
    throw std::runtime_error(manifest_path.string() + ": damaged: COMMITTED records " + std::to_string(expected_bytes) +
                             " bytes with CRC32 " + std::to_string(expected_crc) + ", the file has " +
                             std::to_string(text.size()) + " bytes with CRC32 " + std::to_string(crc));
  }
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw std::runtime_error(manifest_path.string() + ": not valid JSON (" + e.what() + ")");
  }
}

// One dataset of the manifest, read from its file and checked against every recorded property.
Tensor read_verified_dataset(const JsonReader& entry, const fs::path& directory, const std::set<std::string>& listed,
                             std::map<std::string, Hdf5File>& files, std::string* name_out) {
  const std::string name = entry.string("name");
  const std::string file_name = entry.string("file");
  if (!listed.count(file_name)) entry.fail("file", "one of the manifest's files", file_name);
  const DType dtype = parse_dtype(entry.string("dtype"), entry);
  const std::vector<int64_t> shape = entry.integers("shape");
  const std::vector<int64_t> full_shape = entry.integers("full_shape");
  const std::vector<int64_t> offset = entry.integers("offset");
  const int64_t bytes = entry.integer("bytes");
  const int64_t crc = entry.integer("crc32");
  if (full_shape != shape || offset != std::vector<int64_t>(shape.size(), 0)) {
    entry.fail("offset",
               "a whole tensor (this build does not assemble slices written by several ranks: resharding is not "
               "implemented)",
               json{{"shape", shape}, {"full_shape", full_shape}, {"offset", offset}});
  }

  auto file = files.find(file_name);
  if (file == files.end()) file = files.emplace(file_name, Hdf5File::open(directory / file_name)).first;
  const Hdf5File& h5 = file->second;
  const std::string where = (directory / file_name).string() + ", dataset '" + name + "'";
  const Hdf5DatasetInfo info = h5.dataset_info(name);
  if (info.dtype != dtype || info.shape != Shape(shape.begin(), shape.end())) {
    throw std::runtime_error(where + ": stored as " + std::string(dtype_name(info.dtype)) + shape_string(info.shape) +
                             ", the manifest says " + std::string(dtype_name(dtype)) +
                             shape_string(Shape(shape.begin(), shape.end())));
  }
  if (h5.int_array_attribute(name, "full_shape") != full_shape || h5.int_array_attribute(name, "offset") != offset) {
    throw std::runtime_error(where + ": attributes full_shape/offset disagree with the manifest");
  }
  Tensor tensor = h5.read(name);
  const uint32_t actual_crc = crc32_of(tensor.raw(), tensor.nbytes());
  if (static_cast<int64_t>(tensor.nbytes()) != bytes || actual_crc != crc) {
    throw std::runtime_error(where + ": checksum mismatch: the manifest records " + std::to_string(bytes) +
                             " bytes with CRC32 " + std::to_string(crc) + ", the data has " +
                             std::to_string(tensor.nbytes()) + " bytes with CRC32 " + std::to_string(actual_crc));
  }
  *name_out = name;
  return tensor;
}

}  // namespace

CheckpointState load_checkpoint(const fs::path& directory_argument) {
  const fs::path directory =
      directory_argument.filename().empty() ? directory_argument.parent_path() : directory_argument;
  const std::optional<int64_t> step_in_name = parse_checkpoint_directory_name(directory.filename().string());
  if (!step_in_name) {
    throw std::runtime_error("checkpoint '" + directory.string() + "': not a step-NNNNNNNNN directory");
  }
  std::error_code ec;
  if (!fs::is_directory(directory, ec))
    throw std::runtime_error("checkpoint '" + directory.string() + "': no such directory");

  const json manifest = read_verified_manifest(directory);
  const fs::path manifest_path = directory / kManifestName;
  const JsonReader reader(manifest, manifest_path, "");
  if (reader.string("format") != kFormatName)
    reader.fail("format", std::string("\"") + kFormatName + "\"", manifest["format"]);
  if (reader.integer("format_version") != kCheckpointFormatVersion) {
    reader.fail("format_version", std::to_string(kCheckpointFormatVersion) + " (the version this build reads)",
                manifest["format_version"]);
  }
  CheckpointState state;
  state.step = reader.integer("step");
  if (state.step != *step_in_name)
    reader.fail("step", "the directory's step " + std::to_string(*step_in_name), state.step);
  state.tokens = reader.integer("tokens");
  state.config = reader.string("config");
  state.data_position = reader.object("data_position");
  state.rng_states = reader.object("rng_states");
  state.trainer_state = reader.object("trainer_state");
  const JsonReader layout(reader.object("layout"), manifest_path, "layout: ");
  state.layout = {layout.integer("tp", 1), layout.integer("dp", 1), layout.integer("world", 1)};
  if (state.layout.world != state.layout.tp * state.layout.dp) {
    layout.fail("world", "tp * dp = " + std::to_string(state.layout.tp * state.layout.dp), state.layout.world);
  }

  std::set<std::string> listed_files;
  for (const json& file : reader.array("files")) {
    const std::string name = file.is_string() ? file.get<std::string>() : "";
    if (!name.starts_with("rank-") || !name.ends_with(".h5") || name.find('/') != name.npos) {
      reader.fail("files", "rank-RRRRR.h5 file names", file);
    }
    listed_files.insert(name);
  }
  std::map<std::string, Hdf5File> files;
  std::set<std::string> names;
  const json& datasets = reader.array("datasets");
  for (size_t i = 0; i < datasets.size(); ++i) {
    const JsonReader entry(datasets[i], manifest_path, "datasets[" + std::to_string(i) + "]: ");
    std::string name;
    Tensor tensor = read_verified_dataset(entry, directory, listed_files, files, &name);
    if (!names.insert(name).second) entry.fail("name", "a name not used before", name);
    state.tensors.emplace_back(std::move(name), std::move(tensor));
  }
  return state;
}

std::optional<CheckpointState> load_latest_checkpoint(const fs::path& root, const CheckpointLoadOptions& options) {
  const std::vector<CommittedCheckpoint> committed = list_committed_checkpoints(root);
  std::vector<std::string> problems;
  for (auto it = committed.rbegin(); it != committed.rend(); ++it) {
    try {
      CheckpointState state = load_checkpoint(it->directory);
      if (options.problems) options.problems->insert(options.problems->end(), problems.begin(), problems.end());
      return state;
    } catch (const std::exception& e) {
      problems.push_back("checkpoint '" + it->directory.string() + "' is damaged, skipping it: " + e.what());
      LOG(WARNING) << problems.back()
                   << (std::next(it) != committed.rend() ? "; falling back to the previous one" : "");
    }
  }
  if (options.problems) options.problems->insert(options.problems->end(), problems.begin(), problems.end());
  if (options.strict) {
    std::string message = "no valid checkpoint under '" + root.string() + "'";
    message += problems.empty() ? " (none is committed)" : ":";
    for (const std::string& p : problems) message += "\n  " + p;
    throw std::runtime_error(message);
  }
  return std::nullopt;
}

}  // namespace linea
