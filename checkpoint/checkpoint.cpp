#include "checkpoint/checkpoint.h"

#include <glog/logging.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

#include "checkpoint/hdf5_file.h"
#include "data/atomic_file.h"

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
    marker = json::parse(data::read_file(marker_path));
  } catch (const json::exception& e) {
    throw std::runtime_error(marker_path.string() + ": not valid JSON (" + e.what() + ")");
  }
  const JsonReader marker_reader(marker, marker_path, "");
  const int64_t expected_bytes = marker_reader.integer("manifest_bytes");
  const int64_t expected_crc = marker_reader.integer("manifest_crc32");

  const fs::path manifest_path = directory / kManifestName;
  const std::string text = data::read_file(manifest_path);
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

std::string part_file_name(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d.json", rank);
  return name;
}

// One stored dataset: a block of a tensor in one rank file.
struct StoredBlock {
  std::string file;
  TensorBlock block;
  int64_t bytes = 0;
  int64_t crc = 0;
};

// A tensor of a manifest: its full shape and dtype, and the blocks that tile it.
struct StoredTensor {
  Shape full_shape;
  DType dtype = DType::f32;
  std::vector<StoredBlock> blocks;
};

// The tensors of a manifest's "datasets" array, checked entry by entry (fields, files, block
// inside full_shape; entries of one name agree on full_shape and dtype, and their blocks tile it).
// `order` receives the names in order of first appearance.
std::map<std::string, StoredTensor> parse_datasets(const json& datasets, const fs::path& manifest_path,
                                                   const std::set<std::string>& listed_files,
                                                   std::vector<std::string>& order) {
  std::map<std::string, StoredTensor> tensors;
  std::map<std::string, size_t> first_entry;
  std::set<std::pair<std::string, std::string>> file_and_name;
  for (size_t i = 0; i < datasets.size(); ++i) {
    const JsonReader entry(datasets[i], manifest_path, "datasets[" + std::to_string(i) + "]: ");
    const std::string name = entry.string("name");
    StoredBlock stored;
    stored.file = entry.string("file");
    if (!listed_files.count(stored.file)) entry.fail("file", "one of the manifest's files", stored.file);
    const DType dtype = parse_dtype(entry.string("dtype"), entry);
    const std::vector<int64_t> shape = entry.integers("shape");
    const std::vector<int64_t> full_shape = entry.integers("full_shape");
    stored.block = {entry.integers("offset"), Shape(shape.begin(), shape.end())};
    stored.bytes = entry.integer("bytes");
    stored.crc = entry.integer("crc32");
    if (!block_inside(stored.block, Shape(full_shape.begin(), full_shape.end()))) {
      entry.fail("offset", "a block inside full_shape",
                 json{{"shape", shape}, {"full_shape", full_shape}, {"offset", stored.block.offset}});
    }
    if (!file_and_name.insert({stored.file, name}).second)
      entry.fail("name", "a name not used before in its file", name);
    auto [it, added] = tensors.try_emplace(name);
    StoredTensor& t = it->second;
    if (added) {
      t.full_shape = Shape(full_shape.begin(), full_shape.end());
      t.dtype = dtype;
      first_entry[name] = i;
      order.push_back(name);
    } else if (t.full_shape != Shape(full_shape.begin(), full_shape.end()) || t.dtype != dtype) {
      entry.fail("full_shape",
                 "the dtype and full_shape of datasets[" + std::to_string(first_entry[name]) +
                     ", the other block of '" + name + "': " + std::string(dtype_name(t.dtype)) +
                     shape_string(t.full_shape),
                 json{{"dtype", dtype_name(dtype)}, {"full_shape", full_shape}});
    }
    t.blocks.push_back(std::move(stored));
  }
  // The blocks of each tensor must tile it: no two overlap, and together they hold every element.
  for (const auto& [name, t] : tensors) {
    int64_t stored_numel = 0;
    for (size_t a = 0; a < t.blocks.size(); ++a) {
      stored_numel += shape_numel(t.blocks[a].block.shape);
      for (size_t b = a + 1; b < t.blocks.size(); ++b) {
        if (block_overlap_numel(t.blocks[a].block, t.blocks[b].block) > 0) {
          throw std::runtime_error(manifest_path.string() + ": tensor '" + name + "': the blocks " +
                                   block_string(t.blocks[a].block) + " (" + t.blocks[a].file + ") and " +
                                   block_string(t.blocks[b].block) + " (" + t.blocks[b].file + ") overlap");
        }
      }
    }
    if (stored_numel != shape_numel(t.full_shape)) {
      throw std::runtime_error(manifest_path.string() + ": tensor '" + name + "' of shape " +
                               shape_string(t.full_shape) + ": its blocks hold " + std::to_string(stored_numel) +
                               " of its " + std::to_string(shape_numel(t.full_shape)) +
                               " elements (a rank's part is missing)");
    }
  }
  return tensors;
}

json manifest_json(const CheckpointState& state, const json& files, const json& datasets) {
  return {
      {"format", kFormatName},
      {"format_version", kCheckpointFormatVersion},
      {"step", state.step},
      {"tokens", state.tokens},
      {"config", state.config},
      {"data_position", state.data_position},
      {"rng_states", state.rng_states},
      {"trainer_state", state.trainer_state},
      {"layout", {{"tp", state.layout.tp}, {"dp", state.layout.dp}, {"world", state.layout.world}}},
      {"files", files},
      {"datasets", datasets},
  };
}

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

TensorBlock CheckpointTensor::block() const {
  return {offset.empty() ? std::vector<int64_t>(data.shape().size(), 0) : offset, data.shape()};
}

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
  for (const CheckpointTensor& t : state.tensors) {
    check_tensor_name(t.name);
    if (!names.insert(t.name).second) bad("tensor name '" + t.name + "' appears twice");
    if (!t.data.defined()) bad("tensor '" + t.name + "' is undefined");
    if (!t.whole() && !block_inside(t.block(), t.full_shape)) {
      bad("tensor '" + t.name + "': the block " + block_string(t.block()) + " of shape " +
          shape_string(t.data.shape()) + " does not lie inside its full shape " + shape_string(t.full_shape));
    }
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
  for (const CheckpointTensor& t : state.tensors) {
    const Tensor host = t.data.device() == Device::cpu ? t.data : t.data.clone();
    const TensorBlock block = t.block();
    const Shape full = t.full();
    file.write(t.name, host);
    file.set_attribute(t.name, "full_shape", std::vector<int64_t>(full));
    file.set_attribute(t.name, "offset", block.offset);
    datasets.push_back({{"name", t.name},
                        {"file", path.filename().string()},
                        {"dtype", dtype_name(host.dtype())},
                        {"shape", shape_json(host.shape())},
                        {"full_shape", shape_json(full)},
                        {"offset", block.offset},
                        {"bytes", host.nbytes()},
                        {"crc32", crc32_of(host.raw(), host.nbytes())}});
  }
  file.close();
  data::fsync_path(path);
  return datasets;
}

}  // namespace

fs::path begin_checkpoint_save(const fs::path& root, int64_t step) {
  // A damaged checkpoint of this step is set aside (e.g. a run with train.resume = "never" over
  // older checkpoints; the trainer's resume sets aside those it skips itself). A sound one is
  // never replaced.
  const std::vector<CommittedCheckpoint> existing = list_committed_checkpoints(root);
  const auto same_step =
      std::find_if(existing.begin(), existing.end(), [&](const CommittedCheckpoint& c) { return c.step == step; });
  if (same_step != existing.end()) {
    try {
      load_checkpoint(same_step->directory);
    } catch (const std::exception& e) {
      const fs::path damaged = set_aside_damaged_checkpoint(same_step->directory);
      LOG(WARNING) << "checkpoint '" << same_step->directory.string() << "' is damaged (" << e.what()
                   << "): set aside as '" << damaged.string() << "'";
    }
  }
  return begin_checkpoint(root, step);
}

void write_checkpoint_part(const fs::path& temporary, const CheckpointState& state, int rank) {
  validate_checkpoint_state(state, 1);
  if (rank < 0) throw std::invalid_argument("write_checkpoint_part: rank must be >= 0, got " + std::to_string(rank));
  const std::string file_name = rank_file_name(rank);
  const json part = {{"file", file_name}, {"datasets", write_rank_file(temporary / file_name, state, rank)}};
  data::write_file_atomically(temporary / part_file_name(rank), part.dump() + "\n");
}

fs::path commit_checkpoint_save(const fs::path& temporary, const CheckpointState& state, int world, int keep_last) {
  validate_checkpoint_state(state, keep_last);
  if (world < 1)
    throw std::invalid_argument("commit_checkpoint_save: world must be >= 1, got " + std::to_string(world));
  json files = json::array(), datasets = json::array();
  for (int rank = 0; rank < world; ++rank) {
    const fs::path part_path = temporary / part_file_name(rank);
    json part;
    try {
      part = json::parse(data::read_file(part_path));
    } catch (const json::exception& e) {
      throw std::runtime_error(part_path.string() + ": not valid JSON (" + e.what() + ")");
    }
    const JsonReader reader(part, part_path, "");
    files.push_back(reader.string("file"));
    for (const json& d : reader.array("datasets")) datasets.push_back(d);
  }
  std::set<std::string> listed(files.begin(), files.end());
  std::vector<std::string> order;
  parse_datasets(datasets, temporary / kManifestName, listed, order);  // throws unless the parts tile every tensor

  const std::string manifest_text = manifest_json(state, files, datasets).dump(2) + "\n";
  data::write_file_atomically(temporary / kManifestName, manifest_text);
  for (int rank = 0; rank < world; ++rank) fs::remove(temporary / part_file_name(rank));
  const json marker = {{"manifest_bytes", manifest_text.size()},
                       {"manifest_crc32", crc32_of(manifest_text.data(), manifest_text.size())}};
  const fs::path committed = commit_checkpoint(temporary, marker.dump() + "\n");
  prune_checkpoints(committed.parent_path(), keep_last);
  return committed;
}

fs::path save_checkpoint(const fs::path& root, const CheckpointState& state, int keep_last) {
  validate_checkpoint_state(state, keep_last);
  const fs::path temporary = begin_checkpoint_save(root, state.step);
  write_checkpoint_part(temporary, state, 0);
  return commit_checkpoint_save(temporary, state, 1, keep_last);
}

// ---- loading ----------------------------------------------------------------------------------

namespace {

// One stored block, read from its file and checked against everything the manifest records.
Tensor read_verified_block(const Hdf5File& h5, const std::string& name, const StoredBlock& stored,
                           const StoredTensor& tensor, const fs::path& directory) {
  const std::string where = (directory / stored.file).string() + ", dataset '" + name + "'";
  const Hdf5DatasetInfo info = h5.dataset_info(name);
  if (info.dtype != tensor.dtype || info.shape != stored.block.shape) {
    throw std::runtime_error(where + ": stored as " + std::string(dtype_name(info.dtype)) + shape_string(info.shape) +
                             ", the manifest says " + std::string(dtype_name(tensor.dtype)) +
                             shape_string(stored.block.shape));
  }
  if (h5.int_array_attribute(name, "full_shape") != std::vector<int64_t>(tensor.full_shape) ||
      h5.int_array_attribute(name, "offset") != stored.block.offset) {
    throw std::runtime_error(where + ": attributes full_shape/offset disagree with the manifest");
  }
  Tensor data = h5.read(name);
  const uint32_t actual_crc = crc32_of(data.raw(), data.nbytes());
  if (static_cast<int64_t>(data.nbytes()) != stored.bytes || actual_crc != stored.crc) {
    throw std::runtime_error(where + ": checksum mismatch: the manifest records " + std::to_string(stored.bytes) +
                             " bytes with CRC32 " + std::to_string(stored.crc) + ", the data has " +
                             std::to_string(data.nbytes()) + " bytes with CRC32 " + std::to_string(actual_crc));
  }
  return data;
}

}  // namespace

struct CheckpointReader::Impl {
  fs::path directory;
  CheckpointState info;
  std::vector<std::string> order;
  std::map<std::string, StoredTensor> tensors;
  std::map<std::string, Hdf5File> files;  // opened on first use

  const StoredTensor& tensor(const std::string& name) const {
    auto it = tensors.find(name);
    if (it == tensors.end()) {
      throw std::runtime_error("checkpoint '" + directory.string() + "': has no tensor '" + name + "'");
    }
    return it->second;
  }
  const Hdf5File& file(const std::string& file_name) {
    auto it = files.find(file_name);
    if (it == files.end()) it = files.emplace(file_name, Hdf5File::open(directory / file_name)).first;
    return it->second;
  }
};

CheckpointReader::CheckpointReader(const fs::path& directory_argument) : impl_(std::make_unique<Impl>()) {
  const fs::path directory =
      directory_argument.filename().empty() ? directory_argument.parent_path() : directory_argument;
  impl_->directory = directory;
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
  CheckpointState& state = impl_->info;
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
  impl_->tensors = parse_datasets(reader.array("datasets"), manifest_path, listed_files, impl_->order);
}

CheckpointReader::CheckpointReader(CheckpointReader&&) noexcept = default;
CheckpointReader& CheckpointReader::operator=(CheckpointReader&&) noexcept = default;
CheckpointReader::~CheckpointReader() = default;

const fs::path& CheckpointReader::directory() const { return impl_->directory; }
const CheckpointState& CheckpointReader::info() const { return impl_->info; }
std::vector<std::string> CheckpointReader::tensor_names() const { return impl_->order; }
bool CheckpointReader::contains(const std::string& name) const { return impl_->tensors.count(name) > 0; }
Shape CheckpointReader::full_shape(const std::string& name) const { return impl_->tensor(name).full_shape; }
DType CheckpointReader::dtype(const std::string& name) const { return impl_->tensor(name).dtype; }

void CheckpointReader::read(const std::string& name, const std::vector<int64_t>& offset, const Tensor& out) {
  const StoredTensor& t = impl_->tensor(name);
  const TensorBlock wanted{offset, out.shape()};
  const std::string where = "checkpoint '" + impl_->directory.string() + "': tensor '" + name + "'";
  if (out.dtype() != t.dtype || out.device() != Device::cpu || !block_inside(wanted, t.full_shape)) {
    throw std::runtime_error(where + " is " + std::string(dtype_name(t.dtype)) + shape_string(t.full_shape) +
                             "; cannot read the block " + block_string(wanted) + " into " + out.describe());
  }
  int64_t copied = 0;
  for (const StoredBlock& stored : t.blocks) {
    if (block_overlap_numel(stored.block, wanted) == 0) continue;
    const Tensor data = read_verified_block(impl_->file(stored.file), name, stored, t, impl_->directory);
    copied += copy_block_overlap(data, stored.block.offset, out, offset);
  }
  if (copied != out.numel()) {  // cannot happen after the tiling check; kept as a guard
    throw std::runtime_error(where + ": the stored blocks hold " + std::to_string(copied) + " of the " +
                             std::to_string(out.numel()) + " elements of " + block_string(wanted));
  }
}

Tensor CheckpointReader::read(const std::string& name) {
  const StoredTensor& t = impl_->tensor(name);
  if (t.blocks.size() == 1)
    return read_verified_block(impl_->file(t.blocks[0].file), name, t.blocks[0], t, impl_->directory);
  Tensor whole = Tensor::empty(t.full_shape, t.dtype);
  read(name, std::vector<int64_t>(t.full_shape.size(), 0), whole);
  return whole;
}

CheckpointState load_checkpoint(const fs::path& directory) {
  CheckpointReader reader(directory);
  CheckpointState state = reader.info();
  for (const std::string& name : reader.tensor_names()) {
    Tensor data = reader.read(name);
    std::vector<int64_t> origin(data.shape().size(), 0);
    Shape full = data.shape();
    state.tensors.emplace_back(name, std::move(data), std::move(full), std::move(origin));
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
