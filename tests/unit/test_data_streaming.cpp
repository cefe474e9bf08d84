// Training data straight from parquet (data/streaming_loader.h): the stream of a streaming run is
// the token stream `linea prepare` writes for the same files, its batches are that stream's windows
// in order for any number of ranks, a resumed stream continues with exactly the next batch, and the
// trainer runs on it (stop and resume bit-exact); and uint32 shards (llm.c's version 7) train.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/hf_tokenizer.h"
#include "data/prepare.h"
#include "data/streaming_loader.h"
#include "tests/testing/error_of.h"
#include "tests/testing/fixtures.h"
#include "tests/testing/json_lines.h"
#include "tests/testing/synthetic_shards.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tiny_model.h"
#include "worker/run_config.h"
#include "worker/trainer.h"

namespace linea::data {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::fixture_dir;

std::vector<fs::path> fixture_files() {
  const fs::path dir = fixture_dir() / "parquet";
  return {dir / "snappy_dict_v1.parquet", dir / "zstd_plain_v2.parquet", dir / "gzip_dict_v2.parquet"};
}

fs::path tokenizer_file() { return fixture_dir() / "tokenizer" / "hf_bytelevel.json"; }

constexpr int64_t kValDocs = 7;

// `linea prepare --val-docs 7` over the fixture files.
std::shared_ptr<const Dataset> prepared(const fs::path& out, const RowFilter& filter = {}) {
  PrepareOptions o;
  o.output = out;
  o.tokenizer = TokenizerChoice::parse("hf:" + tokenizer_file().string());
  o.shard_tokens = 700;  // several shards
  o.val_docs = kValDocs;
  o.threads = 3;
  o.progress = false;
  DocumentOptions d;
  d.filter = filter;
  d.threads = 2;
  prepare_corpus([&] { return std::make_unique<FileDocumentSource>(fixture_files(), d); }, o);
  return Dataset::open(out);
}

StreamingConfig stream_config(int rank, int world, const RowFilter& filter = {}) {
  StreamingConfig c;
  c.files = fixture_files();
  c.parquet.filter = filter;
  c.parquet.threads = 2;
  c.tokenizer = std::make_shared<HfTokenizer>(tokenizer_file());
  c.val_docs = kValDocs;
  c.threads = 3;
  c.loader.seq_len = 16;
  c.loader.global_batch_seqs = 8;
  c.loader.micro_batch_seqs = 2;
  c.loader.rank = rank;
  c.loader.world = world;
  return c;
}

std::vector<int32_t> all_tokens(const TokenStream& s) {
  std::vector<int32_t> t(static_cast<size_t>(s.num_tokens()));
  s.read(0, s.num_tokens(), t.data());
  return t;
}

// The inputs and targets of window w (tokens [w·T, w·T + T + 1)) of `tokens`.
void expect_window(const TokenBatch& batch, int64_t row, const std::vector<int32_t>& tokens, int64_t w, int64_t T) {
  for (int64_t t = 0; t < T; ++t) {
    ASSERT_EQ(batch.inputs[static_cast<size_t>(row * T + t)], tokens[static_cast<size_t>(w * T + t)])
        << "window " << w << " token " << t;
    ASSERT_EQ(batch.targets[static_cast<size_t>(row * T + t)], tokens[static_cast<size_t>(w * T + t + 1)]);
  }
}

TEST(StreamingLoader, StreamIsPreparesTokenStreamInOrderForAnyRankCount) {
  const testing::TempDir dir;
  const auto data = prepared(dir / "shards");
  ASSERT_GT(data->manifest().shards.size(), 3u);
  const auto train = all_tokens(data->split(Split::train));
  const int64_t T = 16, G = 8, B = 2;
  const int64_t steps = static_cast<int64_t>(train.size() - 1) / T / G;
  ASSERT_GE(steps, 4);
  for (int world : {1, 2}) {
    for (int rank = 0; rank < world; ++rank) {
      StreamingLoader loader(stream_config(rank, world));
      EXPECT_EQ(all_tokens(*loader.val_stream()), all_tokens(data->split(Split::val)));
      ASSERT_EQ(loader.micro_steps_per_step(), G / world / B);
      for (int64_t g = 0; g < steps; ++g) {
        for (int64_t m = 0; m < loader.micro_steps_per_step(); ++m) {
          const TokenBatch batch = loader.next();
          ASSERT_EQ(batch.batch_seqs, B);
          for (int64_t b = 0; b < B; ++b) expect_window(batch, b, train, g * G + rank * (G / world) + m * B + b, T);
          // A sequence starts at every row and every EOS (document masking).
          EXPECT_EQ(batch.layout.cu_seqlens.front(), 0);
          EXPECT_EQ(batch.layout.cu_seqlens.back(), B * T);
        }
      }
      // The stream ends before another full global batch: the next epoch starts over.
      const TokenBatch again = loader.next();
      for (int64_t b = 0; b < B; ++b) expect_window(again, b, train, rank * (G / world) + b, T);
      EXPECT_EQ(loader.stream_position().epoch, 1);
    }
  }
}

TEST(StreamingLoader, WhereFilterMatchesPrepare) {
  const testing::TempDir dir;
  const RowFilter filter = RowFilter::parse({"int_score>=2"});
  const auto train = all_tokens(prepared(dir / "shards", filter)->split(Split::train));
  StreamingLoader loader(stream_config(0, 1, filter));
  for (int64_t i = 0; i < 8; ++i) {
    const TokenBatch batch = loader.next();
    for (int64_t b = 0; b < 2; ++b) expect_window(batch, b, train, 2 * i + b, 16);
  }
}

// A loader resumed from any position (mid-step, at a step boundary, just before an epoch ends)
// continues with exactly the batches of the loader that went on.
TEST(StreamingLoader, ResumeContinuesWithTheExactNextBatch) {
  StreamingLoader reference(stream_config(1, 2));
  std::vector<TokenBatch> batches;
  std::vector<nlohmann::json> positions;
  for (int i = 0; i < 40; ++i) {
    positions.push_back(reference.position());
    batches.push_back(reference.next());
  }
  for (int k : {1, 2, 5, 17, 31}) {
    StreamingLoader resumed(stream_config(1, 2));
    const std::string saved = positions[static_cast<size_t>(k)].dump();  // as a checkpoint stores it
    resumed.check_position(nlohmann::json::parse(saved), "test");
    resumed.seek(nlohmann::json::parse(saved), "test");
    for (int i = k; i < 40; ++i) {
      const TokenBatch b = resumed.next();
      ASSERT_EQ(b.inputs, batches[static_cast<size_t>(i)].inputs) << "resumed at " << k << ", batch " << i;
      ASSERT_EQ(b.targets, batches[static_cast<size_t>(i)].targets);
      ASSERT_EQ(b.layout.cu_seqlens, batches[static_cast<size_t>(i)].layout.cu_seqlens);
    }
  }
  // At a step boundary another layout resumes too: rank 0 of 1 sees the whole global batch.
  StreamingLoader one(stream_config(0, 1));
  one.seek(positions[4], "test");  // 2 micro-steps per step on 2 ranks: batch 4 starts step 2
  StreamingLoader two(stream_config(0, 2));
  two.seek(positions[4], "test");
  const TokenBatch whole = one.next();
  EXPECT_EQ(std::vector<int32_t>(whole.inputs.begin(), whole.inputs.begin() + 32), two.next().inputs);
}

TEST(StreamingLoader, PositionsOfAnotherStreamAreRefused) {
  StreamingLoader loader(stream_config(0, 1));
  loader.next();
  const nlohmann::json p = loader.position();
  StreamingConfig other = stream_config(0, 1);
  other.val_docs = 3;
  StreamingLoader different(std::move(other));
  const std::string message = error_of([&] { different.check_position(p, "ckpt/step_000001"); });
  EXPECT_NE(message.find("ckpt/step_000001"), std::string::npos) << message;
  EXPECT_NE(message.find("'val_docs' was 7 and is 3"), std::string::npos) << message;
  EXPECT_NE(error_of([&] {
              loader.check_position(nlohmann::json{{"epoch", 0}}, "x");
            }).find("not a parquet stream"),
            std::string::npos);
}

TEST(StreamingLoader, TooLittleDataIsAClearError) {
  StreamingConfig c = stream_config(0, 1);
  c.loader.seq_len = 4096;
  StreamingLoader loader(std::move(c));
  EXPECT_NE(error_of([&] { loader.next(); }).find("fewer than one global batch"), std::string::npos);
  StreamingConfig all_val = stream_config(0, 1);
  all_val.val_docs = 100000;
  EXPECT_NE(error_of([&] { StreamingLoader l(std::move(all_val)); }).find("none left for training"), std::string::npos);
}

// ---- The trainer on a parquet stream, and on uint32 (version 7) shards.

std::string streaming_run_config(const fs::path& run_dir) {
  std::ostringstream glob;
  glob << (fixture_dir() / "parquet").string() << "/snappy_*.parquet";
  return R"(device = "cpu"
[run]
name = "stream"
dir = ")" +
         run_dir.string() + "\"\n" + testing::tiny_hybrid_model(900) + R"([optimizer]
kind = "adamw"
lr = 3e-3
warmup_steps = 2
[train]
steps = 12
batch_seqs = 4
micro_batch_seqs = 2
seq_len = 32
eval_every = 6
eval_batches = 1
checkpoint_every = 3
threads = 1
[data]
path = "parquet:)" +
         glob.str() +
         R"("
tokenizer = "hf:)" +
         tokenizer_file().string() +
         R"("
val_docs = 10
where = "int_score>=1"
threads = 2
)";
}

void expect_same_losses(const fs::path& a, const fs::path& b) {
  const auto x = testing::json_lines(a), y = testing::json_lines(b);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(x[i]["loss"], y[i]["loss"]) << "line " << i;
    EXPECT_EQ(x[i].contains("val_loss"), y[i].contains("val_loss"));
    if (x[i].contains("val_loss")) {
      EXPECT_EQ(x[i]["val_loss"], y[i]["val_loss"]);
    }
  }
}

TEST(StreamingTraining, StopAndResumeIsBitExact) {
  const testing::TempDir dir;
  std::ostringstream log;
  const TrainSummary whole = train(parse_run_config(streaming_run_config(dir / "whole"), "stream.toml", {}), log);
  EXPECT_TRUE(whole.complete);
  EXPECT_NE(log.str().find("a parquet stream of 4 files"), std::string::npos) << log.str();
  train(parse_run_config(streaming_run_config(dir / "split"), "stream.toml", {"train.stop_at=5"}), log);
  const TrainSummary rest = train(parse_run_config(streaming_run_config(dir / "split"), "stream.toml", {}), log);
  EXPECT_EQ(rest.start_step, 5);
  expect_same_losses(dir / "whole" / "stream" / "metrics.jsonl", dir / "split" / "stream" / "metrics.jsonl");
  const auto lines = testing::json_lines(dir / "whole" / "stream" / "metrics.jsonl");
  EXPECT_LT(lines.back()["loss"].get<double>(), lines.front()["loss"].get<double>());
}

TEST(StreamingTraining, BadStreamConfigsNameTheKey) {
  const testing::TempDir dir;
  const auto error = [&](std::vector<std::string> overrides) {
    return error_of([&] { parse_run_config(streaming_run_config(dir / "x"), "stream.toml", overrides); });
  };
  EXPECT_NE(error({"data.val_docs=0"}).find("stream.toml: data.val_docs"), std::string::npos);
  EXPECT_NE(error({"data.tokenizer=bpe:x"}).find("data.tokenizer"), std::string::npos);
  EXPECT_NE(error({"data.where=int_score"}).find("data.where"), std::string::npos);
  const std::string shards = error({"data.path=/tmp/shards"});
  EXPECT_NE(shards.find("stream.toml: data.tokenizer: only for a parquet stream"), std::string::npos) << shards;
}

TEST(ShardVersion7, Uint32ShardsWriteReadAndTrain) {
  const testing::TempDir dir;
  constexpr int64_t kBigVocab = 70000;  // more ids than uint16 holds
  std::vector<int32_t> train_ids = testing::synthetic_tokens(6000, 1), val_ids = testing::synthetic_tokens(1500, 2);
  for (size_t i = 5; i < train_ids.size(); i += 97) train_ids[i] = 69999;  // ids that need 32 bits
  const fs::path data = dir / "data";
  fs::create_directories(data);
  Manifest m;
  m.vocab_size = kBigVocab;
  m.eos_id = 0;
  const auto width = token_width_for_vocab(kBigVocab);
  ASSERT_EQ(width, TokenWidth::u32);
  for (const auto& [name, split, ids] : {std::tuple{"big_train_000000.bin", Split::train, &train_ids},
                                         std::tuple{"big_val_000000.bin", Split::val, &val_ids}}) {
    const ShardSummary s = write_shard(data / name, *ids, width);
    m.shards.push_back({name, split, s.tokens, s.crc32});
  }
  m.save(data);
  const auto opened = Dataset::open(data);
  EXPECT_EQ(all_tokens(opened->split(Split::train)), train_ids);
  const std::string config = R"(device = "cpu"
[run]
name = "v7"
dir = ")" + (dir / "runs").string() +
                             R"("
[model]
d_model = 16
layers = 1
vocab = 70000
mixer = "gdn"
[model.linear]
heads = 2
d_k = 8
d_v = 8
[train]
steps = 3
batch_seqs = 2
seq_len = 32
eval_every = 0
eval_batches = 1
checkpoint_every = -1
threads = 1
[data]
path = ")" + data.string() + "\"\n";
  std::ostringstream log;
  const TrainSummary s = train(parse_run_config(config, "v7.toml", {}), log);
  EXPECT_TRUE(s.complete) << log.str();
  EXPECT_TRUE(std::isfinite(s.last_loss));
}

}  // namespace
}  // namespace linea::data
