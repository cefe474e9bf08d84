#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "data/atomic_file.h"
#include "data/dataset.h"
#include "data/manifest.h"
#include "data/shard_format.h"
#include "tests/testing/error_of.h"
#include "tests/testing/temp_dir.h"

namespace linea::data {
namespace {

using testing::error_of;

using testing::TempDir;

#define EXPECT_ERROR_HAS(statement, ...)                                                          \
  do {                                                                                            \
    const std::string message = error_of([&] { statement; });                                     \
    for (const std::string& part : std::vector<std::string>{__VA_ARGS__}) {                       \
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message; \
    }                                                                                             \
  } while (0)

// A shard exactly as llm.c writes it (write_datafile in dev/data/data_common.py): a 256 × int32
// header {magic, version, count, 0...}, then the tokens as little-endian uint16 or uint32.
std::string llmc_shard_bytes(const std::vector<uint32_t>& tokens, bool uint32_tokens) {
  std::vector<int32_t> header(256, 0);
  header[0] = uint32_tokens ? 20240801 : 20240520;
  header[1] = uint32_tokens ? 7 : 1;
  header[2] = static_cast<int32_t>(tokens.size());
  std::string bytes(reinterpret_cast<const char*>(header.data()), 1024);
  for (uint32_t t : tokens) {
    const unsigned char le[4] = {static_cast<unsigned char>(t), static_cast<unsigned char>(t >> 8),
                                 static_cast<unsigned char>(t >> 16), static_cast<unsigned char>(t >> 24)};
    bytes.append(reinterpret_cast<const char*>(le), uint32_tokens ? 4 : 2);
  }
  return bytes;
}

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

uint32_t zlib_crc_of_file(const std::filesystem::path& path) {
  const std::string bytes = read_file(path);
  return static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

std::vector<int32_t> read_all(const ShardReader& r, int64_t vocab) {
  std::vector<int32_t> out(static_cast<size_t>(r.num_tokens()));
  r.read(0, r.num_tokens(), out.data(), vocab);
  return out;
}

TEST(Shard, RoundTripBothWidths) {
  TempDir dir;
  std::vector<int32_t> ids(5000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7919) % 65536);
  const ShardSummary s16 = write_shard(dir / "a.bin", ids, TokenWidth::u16);
  ids[3] = 100000;  // needs uint32
  const ShardSummary s32 = write_shard(dir / "b.bin", ids, TokenWidth::u32);

  const ShardReader r16(dir / "a.bin"), r32(dir / "b.bin");
  EXPECT_EQ(r16.width(), TokenWidth::u16);
  EXPECT_EQ(r32.width(), TokenWidth::u32);
  EXPECT_EQ(std::filesystem::file_size(dir / "a.bin"), 1024u + 2 * ids.size());
  EXPECT_EQ(std::filesystem::file_size(dir / "b.bin"), 1024u + 4 * ids.size());
  // uint32 shards are llm.c's LLaMA-3 format: magic 20240801, version 7.
  const std::string header = read_file(dir / "b.bin").substr(0, 8);
  int32_t magic, version;
  std::memcpy(&magic, header.data(), 4);
  std::memcpy(&version, header.data() + 4, 4);
  EXPECT_EQ(magic, 20240801);
  EXPECT_EQ(version, 7);
  EXPECT_EQ(read_all(r32, 1 << 20), ids);
  ids[3] = static_cast<int32_t>((3 * 7919) % 65536);
  EXPECT_EQ(read_all(r16, 65536), ids);
  // The streamed CRC equals zlib's CRC of the finished file.
  EXPECT_EQ(s16.crc32, zlib_crc_of_file(dir / "a.bin"));
  EXPECT_EQ(s32.crc32, zlib_crc_of_file(dir / "b.bin"));
  EXPECT_EQ(r16.compute_crc32(), s16.crc32);
  EXPECT_EQ(s16.tokens, 5000);
}

TEST(Shard, ChunkedAppendMatchesOneShot) {
  TempDir dir;
  std::vector<int32_t> ids(1000);
  std::iota(ids.begin(), ids.end(), 0);
  ShardWriter w(dir / "chunked.bin", TokenWidth::u16);
  for (size_t i = 0; i < ids.size(); i += 37) w.append(std::span(ids).subspan(i, std::min<size_t>(37, ids.size() - i)));
  const ShardSummary chunked = w.finish();
  write_shard(dir / "whole.bin", ids, TokenWidth::u16);
  EXPECT_EQ(read_file(dir / "chunked.bin"), read_file(dir / "whole.bin"));
  EXPECT_EQ(chunked.crc32, zlib_crc_of_file(dir / "whole.bin"));
}

TEST(Shard, ByteForByteCompatibleWithLlmc) {
  TempDir dir;
  const std::vector<uint32_t> gpt2_tokens = {50256, 464, 2068, 7586, 21831, 50256, 0, 65535};
  const std::vector<uint32_t> llama3_tokens = {128000, 791, 4062, 14198, 128001, 70000};
  for (bool wide : {false, true}) {
    const auto& tokens = wide ? llama3_tokens : gpt2_tokens;
    const auto llmc = dir / (wide ? "llmc_u32.bin" : "llmc_u16.bin");
    write_bytes(llmc, llmc_shard_bytes(tokens, wide));
    const ShardReader r(llmc);
    EXPECT_EQ(r.width(), wide ? TokenWidth::u32 : TokenWidth::u16);
    const auto got = read_all(r, 1 << 20);
    EXPECT_EQ(std::vector<uint32_t>(got.begin(), got.end()), tokens);
    // And our writer produces exactly llm.c's bytes.
    const auto ours = dir / "ours.bin";
    write_shard(ours, std::vector<int32_t>(tokens.begin(), tokens.end()), wide ? TokenWidth::u32 : TokenWidth::u16);
    EXPECT_EQ(read_file(ours), read_file(llmc));
  }
  // uint32 shards that linea wrote as version 2, before it followed llm.c's version 7, still load.
  std::string legacy = llmc_shard_bytes(llama3_tokens, true);
  const int32_t version2 = 2;
  std::memcpy(legacy.data() + 4, &version2, 4);
  write_bytes(dir / "legacy.bin", legacy);
  const auto got = read_all(ShardReader(dir / "legacy.bin"), 1 << 20);
  EXPECT_EQ(std::vector<uint32_t>(got.begin(), got.end()), llama3_tokens);
}

TEST(Shard, RejectsDamagedFilesNamingThem) {
  TempDir dir;
  const std::string good = llmc_shard_bytes({1, 2, 3, 4}, false);
  const auto path = dir / "damaged_shard.bin";
  const auto with = [&](std::string bytes) {
    write_bytes(path, bytes);
    return [&] { ShardReader r(path); };
  };
  auto patch_int = [](std::string bytes, int index, int32_t value) {
    std::memcpy(bytes.data() + 4 * index, &value, 4);
    return bytes;
  };
  EXPECT_ERROR_HAS(with(good.substr(0, 1000))(), "damaged_shard.bin", "truncated header", "1024");
  EXPECT_ERROR_HAS(with(patch_int(good, 0, 12345))(), "damaged_shard.bin", "bad magic 12345", "20240520", "20240801");
  EXPECT_ERROR_HAS(with(patch_int(good, 1, 7))(), "damaged_shard.bin", "version 7", "expected version 1");
  EXPECT_ERROR_HAS(with(patch_int(patch_int(good, 0, 20240801), 1, 1))(), "expected version 7 (llm.c) or 2");
  EXPECT_ERROR_HAS(with(good.substr(0, good.size() - 1))(), "damaged_shard.bin", "truncated", "4 tokens", "1032 bytes",
                   "1031");
  EXPECT_ERROR_HAS(with(good + "xx")(), "damaged_shard.bin", "2 extra bytes");
  EXPECT_ERROR_HAS(with(patch_int(good, 2, -5))(), "damaged_shard.bin", "negative token count");
  EXPECT_ERROR_HAS(ShardReader r(dir / "absent.bin"), "absent.bin", "cannot open");
}

TEST(Shard, WriterRejectsIdsThatDoNotFit) {
  TempDir dir;
  ShardWriter w(dir / "x.bin", TokenWidth::u16);
  EXPECT_ERROR_HAS(w.append(std::vector<int32_t>{1, 70000}), "x.bin", "70000", "16-bit");
  EXPECT_THROW(w.append(std::vector<int32_t>{-1}), std::invalid_argument);
  EXPECT_EQ(token_width_for_vocab(65536), TokenWidth::u16);
  EXPECT_EQ(token_width_for_vocab(65537), TokenWidth::u32);
}

TEST(AtomicFile, UncommittedWriteLeavesTargetAlone) {
  TempDir dir;
  write_file_atomically(dir / "f.txt", "old");
  {
    AtomicFileWriter w(dir / "f.txt");
    w.write("new content", 11);
  }  // destroyed without commit
  EXPECT_EQ(read_file(dir / "f.txt"), "old");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

// ---- manifests

Manifest sample_manifest() {
  Manifest m;
  m.tokenizer = {"sentencepiece", "tokenizer.model"};
  m.vocab_size = 4096;
  m.eos_id = 2;
  m.shards = {{"c_train_000000.bin", Split::train, 100, 0xdeadbeef}, {"c_val_000000.bin", Split::val, 7, 0x01}};
  return m;
}

TEST(Manifest, JsonRoundTrip) {
  const Manifest m = sample_manifest();
  const Manifest back = Manifest::from_json_text(m.to_json_text(), "test");
  EXPECT_EQ(back.tokenizer.kind, "sentencepiece");
  EXPECT_EQ(back.tokenizer.path, "tokenizer.model");
  EXPECT_EQ(back.vocab_size, 4096);
  EXPECT_EQ(back.eos_id, 2);
  ASSERT_EQ(back.shards.size(), 2u);
  EXPECT_EQ(back.shards[0].file, "c_train_000000.bin");
  EXPECT_EQ(back.shards[1].split, Split::val);
  EXPECT_EQ(back.shards[1].tokens, 7);
  EXPECT_EQ(back.shards[0].crc32, 0xdeadbeefu);
  EXPECT_NE(m.to_json_text().find("\"0xdeadbeef\""), std::string::npos);
}

TEST(Manifest, MalformedFieldsAreNamed) {
  TempDir dir;
  const std::string good = sample_manifest().to_json_text();
  const auto load_with = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    write_file_atomically(dir / "manifest.json", text);
    return [&] { Manifest::load(dir.path()); };
  };
  const std::string file = (dir / "manifest.json").string();
  EXPECT_ERROR_HAS(load_with("\"vocab_size\": 4096", "\"vocab_size\": \"big\"")(), file, "'vocab_size'", "integer");
  EXPECT_ERROR_HAS(load_with("\"eos_id\": 2", "\"eos_id\": 5000")(), file, "'eos_id'", "[0, 4095]");
  EXPECT_ERROR_HAS(load_with("\"split\": \"val\"", "\"split\": \"test\"")(), file, "'shards[1].split'", "\"train\"");
  EXPECT_ERROR_HAS(load_with("\"0xdeadbeef\"", "\"beef\"")(), file, "'shards[0].crc32'", "8 hex digits");
  EXPECT_ERROR_HAS(load_with("\"tokens\": 100", "\"tokens\": -1")(), file, "'shards[0].tokens'");
  EXPECT_ERROR_HAS(load_with("\"c_train_000000.bin\"", "\"../escape.bin\"")(), file, "'shards[0].file'");
  EXPECT_ERROR_HAS(load_with("\"kind\": \"sentencepiece\"", "\"kind\": \"wordpiece\"")(), file, "'tokenizer.kind'");
  EXPECT_ERROR_HAS(load_with("\"format\": \"linea-shards\",", "")(), file, "'format'", "present");
  EXPECT_ERROR_HAS(load_with("{", "[")(), file, "not valid JSON");
  std::filesystem::remove(dir / "manifest.json");
  EXPECT_ERROR_HAS(Manifest::load(dir.path()), file, "cannot open");
}

// ---- datasets

// Two train shards and one val shard with a manifest; tokens are i % 1000.
std::shared_ptr<const Dataset> make_dataset(const TempDir& dir, DatasetOptions options = {}) {
  Manifest m = sample_manifest();
  m.vocab_size = 1000;
  m.shards.clear();
  int64_t next = 0;
  for (auto [name, split, n] : {std::tuple{"c_train_000000.bin", Split::train, 300},
                                {"c_train_000001.bin", Split::train, 0},
                                {"c_train_000002.bin", Split::train, 200},
                                {"c_val_000000.bin", Split::val, 50}}) {
    std::vector<int32_t> ids(n);
    for (auto& id : ids) id = static_cast<int32_t>(next++ % 1000);
    const ShardSummary s = write_shard(dir / name, ids, TokenWidth::u16);
    m.shards.push_back({name, split, s.tokens, s.crc32});
  }
  m.save(dir.path());
  return Dataset::open(dir.path(), options);
}

TEST(Dataset, SplitsReadAcrossShardBoundaries) {
  TempDir dir;
  const auto ds = make_dataset(dir);
  const TokenStream& train = ds->split(Split::train);
  EXPECT_EQ(train.num_tokens(), 500);
  EXPECT_EQ(train.num_shards(), 3);
  std::vector<int32_t> got(20);
  train.read(290, 20, got.data());  // spans shard 0, the empty shard 1 and shard 2
  for (int i = 0; i < 20; ++i) EXPECT_EQ(got[i], 290 + i);
  std::vector<int32_t> val(50);
  ds->split(Split::val).read(0, 50, val.data());
  EXPECT_EQ(val.front(), 500);
  EXPECT_THROW(train.read(490, 20, got.data()), std::out_of_range);
}

TEST(Dataset, ChecksumAndCountMismatchesAreReported) {
  TempDir dir;
  make_dataset(dir);
  {  // flip one token byte of the second train shard
    std::fstream f(dir / "c_train_000002.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1024 + 10);
    f.put('\x7f');
  }
  EXPECT_ERROR_HAS(Dataset::open(dir.path()), "c_train_000002.bin", "checksum mismatch", "manifest.json");
  DatasetOptions no_verify;
  no_verify.verify_checksums = false;
  EXPECT_NO_THROW(Dataset::open(dir.path(), no_verify));

  Manifest m = Manifest::load(dir.path());
  m.shards[0].tokens = 299;
  m.save(dir.path());
  EXPECT_ERROR_HAS(Dataset::open(dir.path(), no_verify), "c_train_000000.bin", "header says 300", "says 299");
}

TEST(Dataset, TokenIdOutsideVocabularyNamesTheShard) {
  TempDir dir;
  make_dataset(dir);
  Manifest m = Manifest::load(dir.path());
  m.vocab_size = 400;  // the shards hold ids up to 499; id 400 is token 100 of c_train_000002.bin
  m.eos_id = 0;
  m.save(dir.path());
  const auto ds = Dataset::open(dir.path());
  std::vector<int32_t> got(10);
  EXPECT_NO_THROW(ds->split(Split::train).read(0, 10, got.data()));
  EXPECT_ERROR_HAS(ds->split(Split::train).read(395, 10, got.data()), "c_train_000002.bin", "token 100", "id 400",
                   "vocabulary size 400");
}

TEST(Dataset, PlainLlmcDirectoryWithoutManifest) {
  TempDir dir;
  // As llm.c's fineweb.py names them: the first shard is val, the rest train.
  write_bytes(dir / "fineweb_val_000000.bin", llmc_shard_bytes({50256, 1, 2, 3}, false));
  write_bytes(dir / "fineweb_train_000001.bin", llmc_shard_bytes({50256, 4, 5, 6, 7}, false));
  write_bytes(dir / "fineweb_train_000002.bin", llmc_shard_bytes({50256, 8}, false));
  EXPECT_ERROR_HAS(Dataset::open(dir.path()), dir.path().string(), "no manifest.json", "vocabulary size");
  DatasetOptions gpt2;
  gpt2.vocab_size = 50257;
  gpt2.eos_id = 50256;
  const auto ds = Dataset::open(dir.path(), gpt2);
  EXPECT_EQ(ds->split(Split::train).num_tokens(), 7);
  EXPECT_EQ(ds->split(Split::val).num_tokens(), 4);
  EXPECT_EQ(ds->eos_id(), 50256);
  EXPECT_THROW(ds->tokenizer(), std::runtime_error);
  write_bytes(dir / "fineweb_test_000003.bin", llmc_shard_bytes({1}, false));
  EXPECT_ERROR_HAS(Dataset::open(dir.path(), gpt2), "fineweb_test_000003.bin", "split");
}

}  // namespace
}  // namespace linea::data
