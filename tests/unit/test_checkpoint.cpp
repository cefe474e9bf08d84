// Checkpoints: bit-exact round trip, the commit protocol (uncommitted directories do not exist),
// falling back past damaged checkpoints, keep-K pruning and the errors bad input must produce.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <zlib.h>

#include <cstring>
#include <fstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/hdf5_file.h"
#include "kernels/random.h"
#include "tests/testing/error_of.h"
#include "tests/testing/temp_dir.h"

namespace linea {
namespace {

using testing::error_of;

namespace fs = std::filesystem;
using nlohmann::json;

Tensor random_tensor(const Shape& shape, DType dtype, Rng& rng) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* bytes = static_cast<unsigned char*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<unsigned char>(rng.next_u64());
  return t;
}

// A training state with every dtype, a scalar, an empty tensor and nested names.
CheckpointState make_state(int64_t step, uint64_t seed = 7) {
  Rng rng(seed + static_cast<uint64_t>(step));
  CheckpointState state;
  state.step = step;
  state.tokens = step * 4096;
  state.config = "[model]\nmixer = \"gdn\"\nlayers = 2\n";
  state.data_position = {{"epoch", 1}, {"shard", 3}, {"offset", 123456789012LL}};
  state.trainer_state = {{"optimizer_step", 7}};
  state.rng_states = {{"init", {0xfedcba9876543210ull, 1ull, 2ull, ~0ull}}, {"dropout", {5, 6, 7, 8}}};
  state.layout = {1, 2, 2};
  state.tensors = {
      {"embedding.weight", random_tensor({16, 8}, DType::f32, rng)},
      {"layers.0.mixer.A_log", random_tensor({4}, DType::f64, rng)},
      {"layers.0.norm.weight", random_tensor({8}, DType::bf16, rng)},
      {"optimizer/adam/step", random_tensor({}, DType::i64, rng)},
      {"optimizer/adam/m", random_tensor({16, 8}, DType::f32, rng)},
      {"data/ids", random_tensor({2, 3}, DType::i32, rng)},
      {"empty", random_tensor({0, 4}, DType::f32, rng)},
  };
  return state;
}

void expect_same_state(const CheckpointState& expected, const CheckpointState& got) {
  EXPECT_EQ(got.step, expected.step);
  EXPECT_EQ(got.tokens, expected.tokens);
  EXPECT_EQ(got.config, expected.config);
  EXPECT_EQ(got.data_position, expected.data_position);
  EXPECT_EQ(got.trainer_state, expected.trainer_state);
  EXPECT_EQ(got.rng_states, expected.rng_states);
  EXPECT_EQ(got.layout, expected.layout);
  ASSERT_EQ(got.tensors.size(), expected.tensors.size());
  for (size_t i = 0; i < got.tensors.size(); ++i) {
    const std::string& name = got.tensors[i].name;
    const Tensor& tensor = got.tensors[i].data;
    const Tensor& want = expected.tensors[i].data;
    EXPECT_EQ(name, expected.tensors[i].name);
    EXPECT_EQ(tensor.device(), Device::cpu);
    EXPECT_EQ(tensor.dtype(), want.dtype()) << name;
    EXPECT_EQ(tensor.shape(), want.shape()) << name;
    EXPECT_EQ(std::memcmp(tensor.raw(), want.raw(), want.nbytes()), 0) << name;
  }
}

std::vector<int64_t> committed_steps(const fs::path& root) {
  std::vector<int64_t> steps;
  for (const CommittedCheckpoint& c : list_committed_checkpoints(root)) steps.push_back(c.step);
  return steps;
}

void overwrite_file(const fs::path& path, const std::string& contents) {
  std::ofstream(path, std::ios::trunc) << contents;
}

// Flips one bit in the stored data of `dataset` (contiguous, so its bytes sit at one file offset).
void flip_data_bit(const fs::path& file, const std::string& dataset) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  const haddr_t offset = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  ASSERT_NE(offset, HADDR_UNDEF);
  std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
  stream.seekg(static_cast<std::streamoff>(offset + 5));
  char byte = 0;
  stream.read(&byte, 1);
  byte = static_cast<char>(byte ^ 0x10);
  stream.seekp(static_cast<std::streamoff>(offset + 5));
  stream.write(&byte, 1);
}

TEST(Checkpoint, RoundTripIsBitExact) {
  testing::TempDir root;
  const CheckpointState state = make_state(5);
  const fs::path directory = save_checkpoint(root.path(), state, 3);
  EXPECT_EQ(directory, root.path() / "step-000000005");
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(directory)) entries.push_back(e.path().filename().string());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"COMMITTED", "manifest.json", "rank-00000.h5"}));
  EXPECT_FALSE(fs::exists(root.path() / "step-000000005.tmp"));

  const std::optional<CheckpointState> loaded = load_latest_checkpoint(root.path());
  ASSERT_TRUE(loaded.has_value());
  expect_same_state(state, *loaded);
  expect_same_state(state, load_checkpoint(directory));
}

TEST(Checkpoint, FilesDescribeSlicesAndChecksums) {
  testing::TempDir root;
  const fs::path directory = save_checkpoint(root.path(), make_state(2), 1);
  const json manifest = json::parse(std::ifstream(directory / "manifest.json"));
  EXPECT_EQ(manifest["format_version"], kCheckpointFormatVersion);
  EXPECT_EQ(manifest["step"], 2);
  EXPECT_EQ(manifest["layout"], (json{{"tp", 1}, {"dp", 2}, {"world", 2}}));
  EXPECT_EQ(manifest["files"], json::array({"rank-00000.h5"}));
  const json& first = manifest["datasets"][0];
  EXPECT_EQ(first["name"], "embedding.weight");
  EXPECT_EQ(first["dtype"], "f32");
  EXPECT_EQ(first["shape"], json::array({16, 8}));
  EXPECT_EQ(first["bytes"], 16 * 8 * 4);
  EXPECT_TRUE(first["crc32"].is_number_unsigned());

  const Hdf5File file = Hdf5File::open(directory / "rank-00000.h5");
  EXPECT_EQ(file.int_attribute("", "step"), 2);
  EXPECT_EQ(file.int_attribute("", "rank"), 0);
  EXPECT_EQ(file.int_array_attribute("optimizer/adam/m", "full_shape"), (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(file.int_array_attribute("optimizer/adam/m", "offset"), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(file.int_array_attribute("optimizer/adam/step", "full_shape"), (std::vector<int64_t>{}));
}

TEST(Checkpoint, UncommittedDirectoriesDoNotExistAndAreCleanedUp) {
  testing::TempDir root;
  save_checkpoint(root.path(), make_state(1), 5);
  const fs::path step2 = save_checkpoint(root.path(), make_state(2), 5);
  // A crash after the rename but before the marker: complete files, no COMMITTED.
  const fs::path step4 = root.path() / "step-000000004";
  fs::copy(step2, step4);
  fs::remove(step4 / "COMMITTED");
  // A crash while writing: a .tmp directory, here even with a marker inside.
  const fs::path step3_tmp = root.path() / "step-000000003.tmp";
  fs::copy(step2, step3_tmp);
  // Names that are not checkpoints at all.
  fs::create_directories(root.path() / "step-12");
  fs::create_directories(root.path() / "notes");

  EXPECT_EQ(committed_steps(root.path()), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(load_latest_checkpoint(root.path())->step, 2);

  save_checkpoint(root.path(), make_state(5), 5);
  EXPECT_FALSE(fs::exists(step4));
  EXPECT_FALSE(fs::exists(step3_tmp));
  EXPECT_TRUE(fs::exists(root.path() / "notes"));
  EXPECT_EQ(committed_steps(root.path()), (std::vector<int64_t>{1, 2, 5}));
}

struct Damage {
  const char* what;
  std::function<void(const fs::path& directory)> apply;
  const char* expected_in_warning;
};

TEST(Checkpoint, DamagedNewestFallsBackToThePreviousWithAWarning) {
  const std::vector<Damage> damages = {
      {"flipped data bit", [](const fs::path& d) { flip_data_bit(d / "rank-00000.h5", "optimizer/adam/m"); },
       "dataset 'optimizer/adam/m': checksum mismatch"},
      {"truncated HDF5 file",
       [](const fs::path& d) { fs::resize_file(d / "rank-00000.h5", fs::file_size(d / "rank-00000.h5") / 2); },
       "rank-00000.h5"},
      {"missing HDF5 file", [](const fs::path& d) { fs::remove(d / "rank-00000.h5"); }, "no such file"},
      {"manifest not JSON", [](const fs::path& d) { overwrite_file(d / "manifest.json", "{ \"step\": "); },
       "manifest.json: damaged"},
      {"manifest edited",
       [](const fs::path& d) {
         json m = json::parse(std::ifstream(d / "manifest.json"));
         m["tokens"] = 1;
         overwrite_file(d / "manifest.json", m.dump(2) + "\n");
       },
       "manifest.json: damaged"},
      {"manifest missing", [](const fs::path& d) { fs::remove(d / "manifest.json"); }, "manifest.json"},
      {"marker garbage", [](const fs::path& d) { overwrite_file(d / "COMMITTED", "yes"); },
       "COMMITTED: not valid JSON"},
  };
  for (const Damage& damage : damages) {
    SCOPED_TRACE(damage.what);
    testing::TempDir root;
    const CheckpointState older = make_state(10);
    save_checkpoint(root.path(), older, 5);
    const fs::path newest = save_checkpoint(root.path(), make_state(20), 5);
    damage.apply(newest);

    std::vector<std::string> problems;
    const std::optional<CheckpointState> loaded = load_latest_checkpoint(root.path(), {.problems = &problems});
    ASSERT_TRUE(loaded.has_value());
    expect_same_state(older, *loaded);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(problems[0].find(newest.string()), std::string::npos) << problems[0];
    EXPECT_NE(problems[0].find(damage.expected_in_warning), std::string::npos) << problems[0];
    EXPECT_THROW(load_checkpoint(newest), std::runtime_error);
  }
}

// A manifest that is intact (its checksum agrees with COMMITTED) but says something wrong, as a
// buggy or future writer could produce: each problem is named.
TEST(Checkpoint, ManifestContentIsValidated) {
  const std::vector<std::pair<std::function<void(json&)>, std::string>> edits = {
      {[](json& m) { m["format_version"] = 2; }, "field 'format_version': expected 1 (the version this build reads)"},
      {[](json& m) { m["step"] = 7; }, "field 'step': expected the directory's step 20, found 7"},
      {[](json& m) { m.erase("tokens"); }, "field 'tokens': expected an integer, found nothing"},
      {[](json& m) { m["layout"]["world"] = 3; }, "layout: field 'world': expected tp * dp = 2, found 3"},
      {[](json& m) { m["rng_states"] = "none"; }, "field 'rng_states': expected a JSON object"},
      {[](json& m) { m["datasets"][1]["dtype"] = "f16"; }, "datasets[1]: field 'dtype': expected one of f32"},
      {[](json& m) {
         m["datasets"][0]["shape"] = {8, 16};
         m["datasets"][0]["full_shape"] = {8, 16};
       },
       "dataset 'embedding.weight': stored as f32[16, 8], the manifest says f32[8, 16]"},
      {[](json& m) {
         m["datasets"][0]["offset"] = {16, 0};
       },
       "field 'offset': expected a block inside full_shape"},
      {[](json& m) { m["datasets"][0]["file"] = "../rank-00000.h5"; }, "expected one of the manifest's files"},
      {[](json& m) { m["files"] = {"../../etc/passwd"}; }, "field 'files': expected rank-RRRRR.h5 file names"},
      {[](json& m) { m["datasets"][2]["name"] = "absent"; }, "dataset 'absent': no such dataset"},
      {[](json& m) { m["datasets"][0]["name"] = "optimizer/adam/m"; },
       "field 'name': expected a name not used before in its file, found \"optimizer/adam/m\""},
      {[](json& m) {  // the entry of another dataset of the same shape: its checksum gives it away
         m["datasets"][4]["name"] = "embedding.weight";
         m["datasets"][0]["name"] = "optimizer/adam/m";
       },
       "dataset 'optimizer/adam/m': checksum mismatch"},
      {[](json& m) { m["datasets"][1]["full_shape"] = {5}; }, "its blocks hold 4 of its 5 elements"},
  };
  for (const auto& [edit, expected] : edits) {
    SCOPED_TRACE(expected);
    testing::TempDir root;
    const fs::path directory = save_checkpoint(root.path(), make_state(20), 1);
    json manifest = json::parse(std::ifstream(directory / "manifest.json"));
    edit(manifest);
    const std::string text = manifest.dump(2);
    overwrite_file(directory / "manifest.json", text);
    const uint32_t crc = static_cast<uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(text.data()), text.size()));
    overwrite_file(directory / "COMMITTED", json{{"manifest_bytes", text.size()}, {"manifest_crc32", crc}}.dump());
    const std::string message = error_of<std::runtime_error>([&] { load_checkpoint(directory); });
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  }
  testing::TempDir root;
  const fs::path directory = save_checkpoint(root.path(), make_state(20), 1);
  Hdf5File::open(directory / "rank-00000.h5", Hdf5File::Access::read_write)
      .set_attribute("embedding.weight", "offset", std::vector<int64_t>{1, 0});
  const std::string message = error_of<std::runtime_error>([&] { load_checkpoint(directory); });
  EXPECT_NE(message.find("attributes full_shape/offset disagree with the manifest"), std::string::npos) << message;
}

// After falling back from a damaged step N, training reaches step N again and saves it.
TEST(Checkpoint, ADamagedStepIsSetAsideWhenSavedAgain) {
  testing::TempDir root;
  save_checkpoint(root.path(), make_state(10), 5);
  const fs::path step20 = save_checkpoint(root.path(), make_state(20), 5);
  EXPECT_THROW(save_checkpoint(root.path(), make_state(20, 99), 5), std::runtime_error);  // sound: kept
  flip_data_bit(step20 / "rank-00000.h5", "embedding.weight");
  EXPECT_EQ(load_latest_checkpoint(root.path())->step, 10);

  const CheckpointState again = make_state(20, 99);
  save_checkpoint(root.path(), again, 5);
  EXPECT_TRUE(fs::exists(root.path() / "step-000000020.damaged" / "rank-00000.h5"));
  EXPECT_EQ(committed_steps(root.path()), (std::vector<int64_t>{10, 20}));
  expect_same_state(again, *load_latest_checkpoint(root.path()));
}

// A damaged checkpoint set aside goes once the keep-last-K window has moved past it.
TEST(Checkpoint, DamagedCheckpointsArePrunedWithTheOldOnes) {
  testing::TempDir root;
  const fs::path step20 = save_checkpoint(root.path(), make_state(20), 2);
  flip_data_bit(step20 / "rank-00000.h5", "embedding.weight");
  save_checkpoint(root.path(), make_state(20, 99), 2);  // sets the damaged step 20 aside
  const fs::path damaged = root.path() / "step-000000020.damaged";
  ASSERT_TRUE(fs::exists(damaged));
  save_checkpoint(root.path(), make_state(30), 2);
  EXPECT_TRUE(fs::exists(damaged)) << "still within the newest 2 (20, 30)";
  save_checkpoint(root.path(), make_state(40), 2);
  EXPECT_EQ(committed_steps(root.path()), (std::vector<int64_t>{30, 40}));
  EXPECT_FALSE(fs::exists(damaged)) << "older than the oldest kept";
}

TEST(Checkpoint, NoValidCheckpointIsAResultUnlessStrict) {
  testing::TempDir root;
  EXPECT_FALSE(load_latest_checkpoint(root.path() / "absent").has_value());
  EXPECT_FALSE(load_latest_checkpoint(root.path()).has_value());
  std::string message = error_of<std::runtime_error>([&] { load_latest_checkpoint(root.path(), {.strict = true}); });
  EXPECT_NE(message.find("none is committed"), std::string::npos) << message;

  const fs::path only = save_checkpoint(root.path(), make_state(1), 2);
  overwrite_file(only / "manifest.json", "{}");
  std::vector<std::string> problems;
  EXPECT_FALSE(load_latest_checkpoint(root.path(), {.problems = &problems}).has_value());
  EXPECT_EQ(problems.size(), 1u);
  message = error_of<std::runtime_error>([&] { load_latest_checkpoint(root.path(), {.strict = true}); });
  EXPECT_NE(message.find(only.string()), std::string::npos) << message;
}

TEST(Checkpoint, KeepsTheLastKCommitted) {
  testing::TempDir root;
  for (int64_t step = 1; step <= 5; ++step) save_checkpoint(root.path(), make_state(step * 100), 2);
  EXPECT_EQ(committed_steps(root.path()), (std::vector<int64_t>{400, 500}));
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(root.path())) entries.push_back(e.path().filename().string());
  EXPECT_EQ(entries.size(), 2u);  // older ones are gone, not merely uncommitted

  // A save that fails deletes nothing and replaces nothing.
  CheckpointState bad = make_state(600);
  bad.tensors.emplace_back("embedding.weight", Tensor::zeros({1}, DType::f32));
  EXPECT_THROW(save_checkpoint(root.path(), bad, 1), std::invalid_argument);
  EXPECT_THROW(save_checkpoint(root.path(), make_state(500), 1), std::runtime_error);  // already committed
  EXPECT_EQ(committed_steps(root.path()), (std::vector<int64_t>{400, 500}));
  expect_same_state(make_state(500), *load_latest_checkpoint(root.path()));

  save_checkpoint(root.path(), make_state(700), 1);
  EXPECT_EQ(committed_steps(root.path()), (std::vector<int64_t>{700}));
}

TEST(Checkpoint, BadInputGivesClearErrors) {
  testing::TempDir root;
  const fs::path file = root.path() / "a-file";
  overwrite_file(file, "x");
  std::string message = error_of<std::runtime_error>([&] { save_checkpoint(file, make_state(1), 1); });
  EXPECT_NE(message.find("checkpoint root '" + file.string() + "'"), std::string::npos) << message;
  message = error_of<std::runtime_error>([&] { load_latest_checkpoint(file); });
  EXPECT_NE(message.find("not a directory"), std::string::npos) << message;
  message = error_of<std::runtime_error>([&] { save_checkpoint(file / "below", make_state(1), 1); });
  EXPECT_NE(message.find("cannot create it"), std::string::npos) << message;

  const auto rejects = [&](const std::function<void(CheckpointState&)>& edit, const std::string& expected) {
    CheckpointState state = make_state(3);
    edit(state);
    const std::string m = error_of<std::invalid_argument>([&] { save_checkpoint(root.path(), state, 1); });
    EXPECT_NE(m.find(expected), std::string::npos) << m;
  };
  rejects([](CheckpointState& s) { s.step = -1; }, "step must be >= 0");
  rejects([](CheckpointState& s) { s.tokens = -5; }, "tokens must be >= 0");
  rejects([](CheckpointState& s) { s.layout = {2, 2, 2}; }, "world = tp * dp");
  rejects([](CheckpointState& s) { s.data_position = json::array(); }, "data_position must be a JSON object");
  rejects([](CheckpointState& s) { s.trainer_state = 3; }, "trainer_state must be a JSON object");
  rejects([](CheckpointState& s) { s.tensors.emplace_back("", Tensor::zeros({1}, DType::f32)); }, "is empty");
  rejects([](CheckpointState& s) { s.tensors.emplace_back("a/../b", Tensor::zeros({1}, DType::f32)); }, "'..'");
  rejects([](CheckpointState& s) { s.tensors.emplace_back("/abs", Tensor::zeros({1}, DType::f32)); }, "start or end");
  rejects([](CheckpointState& s) { s.tensors.emplace_back("undefined", Tensor()); }, "'undefined' is undefined");
  rejects([](CheckpointState& s) { s.tensors.emplace_back("embedding.weight/x", Tensor::zeros({1}, DType::f32)); },
          "collide");
  EXPECT_THROW(save_checkpoint(root.path(), make_state(3), 0), std::invalid_argument);
  EXPECT_TRUE(list_committed_checkpoints(root.path()).empty());

  message = error_of<std::runtime_error>([&] { load_checkpoint(root.path()); });
  EXPECT_NE(message.find("not a step-NNNNNNNNN directory"), std::string::npos) << message;
  message = error_of<std::runtime_error>([&] { load_checkpoint(root.path() / "step-000000001"); });
  EXPECT_NE(message.find("no such directory"), std::string::npos) << message;
}

TEST(Checkpoint, DirectoryNamesHaveOneSpellingPerStep) {
  EXPECT_EQ(checkpoint_directory_name(123), "step-000000123");
  EXPECT_EQ(checkpoint_directory_name(12345678901), "step-12345678901");
  EXPECT_EQ(parse_checkpoint_directory_name("step-000000123"), 123);
  EXPECT_EQ(parse_checkpoint_directory_name("step-12345678901"), 12345678901);
  EXPECT_FALSE(parse_checkpoint_directory_name("step-0000000123"));  // a second spelling of 123
  EXPECT_FALSE(parse_checkpoint_directory_name("step-00000012"));
  EXPECT_FALSE(parse_checkpoint_directory_name("step-000000123.tmp"));
  EXPECT_FALSE(parse_checkpoint_directory_name("step-+00000123"));
  EXPECT_FALSE(parse_checkpoint_directory_name("step-99999999999999999999"));
}

}  // namespace
}  // namespace linea
