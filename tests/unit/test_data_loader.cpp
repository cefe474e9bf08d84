#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "data/dataset.h"
#include "data/index_permutation.h"
#include "data/loader.h"
#include "data/manifest.h"
#include "data/shard_format.h"
#include "tests/testing/temp_dir.h"

namespace linea::data {
namespace {

using testing::TempDir;

constexpr int32_t kEos = 0;
constexpr int64_t kVocab = 1000;

// Documents of 1..40 tokens, each preceded by EOS; token ids 1..999 follow a position pattern so
// that windows are distinguishable. Train: 3 shards; val: 1 shard.
std::shared_ptr<const Dataset> make_dataset(const TempDir& dir, int64_t train_tokens = 6000) {
  Manifest m;
  m.vocab_size = kVocab;
  m.eos_id = kEos;
  std::vector<int32_t> stream;
  for (int64_t doc = 0; static_cast<int64_t>(stream.size()) < train_tokens + 700; ++doc) {
    stream.push_back(kEos);
    for (int64_t t = 0; t < 1 + (doc * 7) % 40; ++t) stream.push_back(static_cast<int32_t>(1 + (stream.size() % 999)));
  }
  const int64_t cuts[] = {0, train_tokens / 3, train_tokens / 2, train_tokens, train_tokens + 700};
  for (int s = 0; s < 4; ++s) {
    const std::string name = s < 3 ? "t_train_00000" + std::to_string(s) + ".bin" : "t_val_000000.bin";
    const std::vector<int32_t> ids(stream.begin() + cuts[s], stream.begin() + cuts[s + 1]);
    const ShardSummary sum = write_shard(dir / name, ids, TokenWidth::u16);
    m.shards.push_back({name, s < 3 ? Split::train : Split::val, sum.tokens, sum.crc32});
  }
  m.save(dir.path());
  return Dataset::open(dir.path());
}

std::vector<int32_t> concat_inputs(const std::vector<TokenBatch>& batches) {
  std::vector<int32_t> all;
  for (const auto& b : batches) all.insert(all.end(), b.inputs.begin(), b.inputs.end());
  return all;
}

TEST(IndexPermutation, IsABijectionForAnySize) {
  for (uint64_t n : {1ull, 2ull, 3ull, 5ull, 17ull, 64ull, 1000ull, 4097ull}) {
    const IndexPermutation p(n, 42);
    std::vector<bool> hit(n, false);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t j = p(i);
      ASSERT_LT(j, n);
      EXPECT_FALSE(hit[j]) << "n=" << n;
      hit[j] = true;
    }
  }
  const IndexPermutation a(1000, 1), b(1000, 2);
  int fixed = 0, same = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    fixed += a(i) == i;
    same += a(i) == b(i);
  }
  EXPECT_LT(fixed, 20);  // a random permutation has about one fixed point
  EXPECT_LT(same, 20);
  EXPECT_THROW(a(1000), std::out_of_range);
}

TEST(Loader, BatchesAreWindowsWithTargetsAndDocumentBoundaries) {
  TempDir dir;
  const auto ds = make_dataset(dir);
  Loader loader(ds, {.seq_len = 32, .global_batch_seqs = 4, .micro_batch_seqs = 4, .seed = 3});
  const int64_t n = ds->split(Split::train).num_tokens();
  EXPECT_EQ(loader.windows_per_epoch(), (n - 1) / 32);
  const TokenBatch b = loader.next();
  ASSERT_EQ(b.inputs.size(), 128u);
  std::vector<int32_t> stream(static_cast<size_t>(n));
  ds->split(Split::train).read(0, n, stream.data());
  std::vector<int64_t> expected_cu{0};
  for (int row = 0; row < 4; ++row) {
    // The row is some window: find it in the stream (windows start at multiples of T).
    const int32_t* in = b.inputs.data() + row * 32;
    bool found = false;
    for (int64_t w = 0; w < loader.windows_per_epoch() && !found; ++w) {
      found = std::equal(in, in + 32, stream.begin() + w * 32) &&
              std::equal(b.targets.begin() + row * 32, b.targets.begin() + row * 32 + 32, stream.begin() + w * 32 + 1);
    }
    EXPECT_TRUE(found) << "row " << row;
    if (row > 0) expected_cu.push_back(row * 32);
    for (int t = 1; t < 32; ++t) {
      if (in[t] == kEos) expected_cu.push_back(row * 32 + t);
    }
  }
  expected_cu.push_back(128);
  EXPECT_EQ(b.layout.cu_seqlens, expected_cu);
  EXPECT_GT(b.layout.num_seqs(), 4);  // documents are shorter than 32 tokens
  EXPECT_NO_THROW(b.layout.validate(128));
}

TEST(Loader, WithoutDocumentMaskingEachRowIsOneSequenceOfTheSameTokens) {
  TempDir dir;
  const auto ds = make_dataset(dir);
  Loader masked(ds, {.seq_len = 32, .global_batch_seqs = 4, .micro_batch_seqs = 4, .seed = 3});
  Loader whole(ds,
               {.seq_len = 32, .global_batch_seqs = 4, .micro_batch_seqs = 4, .seed = 3, .document_masking = false});
  const TokenBatch a = masked.next(), b = whole.next();
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.targets, b.targets);
  EXPECT_GT(a.layout.num_seqs(), 4);
  EXPECT_EQ(b.layout.cu_seqlens, (std::vector<int64_t>{0, 32, 64, 96, 128}));
  ValidationIterator val(ds, 16, 4, 0, 1, 1, false);
  TokenBatch v;
  ASSERT_TRUE(val.next(v));
  EXPECT_EQ(v.layout.cu_seqlens, (std::vector<int64_t>{0, 16, 32, 48, 64}));
}

TEST(Loader, GlobalBatchIsTheSameForAnyRankCountAndMicroBatch) {
  TempDir dir;
  const auto ds = make_dataset(dir);
  const int64_t G = 8, T = 16;
  Loader single(ds, {.seq_len = T, .global_batch_seqs = G, .micro_batch_seqs = G, .seed = 7});
  const int64_t steps = single.steps_per_epoch() + 3;  // run into the second epoch
  std::vector<std::vector<int32_t>> reference;
  for (int64_t s = 0; s < steps; ++s) reference.push_back(single.next().inputs);

  for (int world : {1, 2, 4}) {
    for (int64_t micro : {G / world, int64_t{1}}) {
      std::vector<std::unique_ptr<Loader>> ranks;
      for (int r = 0; r < world; ++r) {
        ranks.push_back(std::make_unique<Loader>(ds, LoaderConfig{.seq_len = T,
                                                                  .global_batch_seqs = G,
                                                                  .micro_batch_seqs = micro,
                                                                  .rank = r,
                                                                  .world = world,
                                                                  .seed = 7}));
      }
      for (int64_t s = 0; s < steps; ++s) {
        std::vector<TokenBatch> parts;
        for (auto& loader : ranks) {
          for (int64_t m = 0; m < loader->micro_steps_per_step(); ++m) parts.push_back(loader->next());
        }
        EXPECT_EQ(concat_inputs(parts), reference[s]) << "world " << world << " micro " << micro << " step " << s;
      }
    }
  }
}

TEST(Loader, PositionSurvivesJsonAndRestoresTheSameTokens) {
  TempDir dir;
  const auto ds = make_dataset(dir);
  const LoaderConfig config{
      .seq_len = 16, .global_batch_seqs = 8, .micro_batch_seqs = 2, .rank = 1, .world = 2, .seed = 11};
  Loader a(ds, config);
  for (int i = 0; i < 5; ++i) a.next();
  const LoaderPosition saved = a.loader_position();
  EXPECT_EQ(saved.step, 2);
  EXPECT_EQ(saved.micro_step, 1);
  const std::string text = saved.to_json().dump();
  std::vector<std::vector<int32_t>> expected;
  for (int i = 0; i < 6; ++i) expected.push_back(a.next().inputs);

  Loader b(ds, config);
  b.next();  // with batches already prefetched
  b.seek_to(LoaderPosition::from_json(nlohmann::json::parse(text), "test"));
  EXPECT_EQ(b.loader_position(), saved);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(b.next().inputs, expected[i]) << i;

  a.seek_to(saved);  // seeking back on the same loader
  EXPECT_EQ(a.next().inputs, expected[0]);
}

TEST(Loader, SeekRejectsPositionsFromAnotherStream) {
  TempDir dir;
  const auto ds = make_dataset(dir);
  Loader a(ds, {.seq_len = 16, .global_batch_seqs = 8, .micro_batch_seqs = 4, .seed = 1});
  LoaderPosition p = a.loader_position();
  p.seed = 2;
  EXPECT_THROW(a.seek_to(p), std::invalid_argument);
  p = a.loader_position();
  p.seq_len = 32;
  EXPECT_THROW(a.seek_to(p), std::invalid_argument);
  p = a.loader_position();
  p.micro_step = 2;  // two micro-steps per step here
  EXPECT_THROW(a.seek_to(p), std::invalid_argument);
  EXPECT_THROW(LoaderPosition::from_json(nlohmann::json{{"epoch", -1}}, "ckpt"), std::runtime_error);
}

TEST(Loader, EachEpochIsADifferentOrderOfAllWindows) {
  TempDir dir;
  const auto ds = make_dataset(dir, 16 * 64 + 1);  // exactly 64 windows of 16 + 1 tokens
  Loader loader(ds, {.seq_len = 16, .global_batch_seqs = 8, .micro_batch_seqs = 8, .seed = 5});
  ASSERT_EQ(loader.windows_per_epoch(), 64);
  ASSERT_EQ(loader.steps_per_epoch(), 8);
  std::vector<int32_t> epoch[2];
  for (auto& e : epoch) {
    for (int s = 0; s < 8; ++s) {
      const auto in = loader.next().inputs;
      e.insert(e.end(), in.begin(), in.end());
    }
  }
  EXPECT_EQ(loader.loader_position().epoch, 2);
  EXPECT_NE(epoch[0], epoch[1]);
  // Both epochs hold every window exactly once.
  const auto windows = [](const std::vector<int32_t>& tokens) {
    std::multiset<std::vector<int32_t>> set;
    for (size_t i = 0; i < tokens.size(); i += 16) set.emplace(tokens.begin() + i, tokens.begin() + i + 16);
    return set;
  };
  EXPECT_EQ(windows(epoch[0]), windows(epoch[1]));
  EXPECT_EQ(windows(epoch[0]).size(), 64u);
  // A different seed gives a different order.
  Loader other(ds, {.seq_len = 16, .global_batch_seqs = 8, .micro_batch_seqs = 8, .seed = 6});
  EXPECT_NE(other.next().inputs, std::vector<int32_t>(epoch[0].begin(), epoch[0].begin() + 128));
}

TEST(Loader, BadConfigurationsAndBadTokensAreReported) {
  TempDir dir;
  const auto ds = make_dataset(dir);
  EXPECT_THROW(Loader(ds, {.seq_len = 16, .global_batch_seqs = 6, .micro_batch_seqs = 4}), std::invalid_argument);
  EXPECT_THROW(Loader(ds, {.seq_len = 16, .global_batch_seqs = 8, .micro_batch_seqs = 2, .rank = 2, .world = 2}),
               std::invalid_argument);
  EXPECT_THROW(Loader(ds, {.seq_len = 4096, .global_batch_seqs = 8, .micro_batch_seqs = 8}), std::invalid_argument);

  Manifest m = Manifest::load(dir.path());
  m.vocab_size = 500;  // the shards hold ids up to 999
  m.save(dir.path());
  Loader bad(Dataset::open(dir.path()), {.seq_len = 64, .global_batch_seqs = 8, .micro_batch_seqs = 8});
  try {
    bad.next();
    ADD_FAILURE() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("t_train_"), std::string::npos) << e.what();
  }
}

TEST(ValidationIterator, FixedOrderSharedAcrossRanks) {
  TempDir dir;
  const auto ds = make_dataset(dir);
  ValidationIterator one(ds, 16, 4, 0, 1);
  EXPECT_EQ(one.num_steps(), (700 - 1) / 16 / 4);
  std::vector<int32_t> val(700);
  ds->split(Split::val).read(0, 700, val.data());
  std::vector<int32_t> all;
  TokenBatch b;
  while (one.next(b)) all.insert(all.end(), b.inputs.begin(), b.inputs.end());
  EXPECT_EQ(all, std::vector<int32_t>(val.begin(), val.begin() + one.num_steps() * 64));  // windows in order

  ValidationIterator r0(ds, 16, 4, 0, 2, 3), r1(ds, 16, 4, 1, 2, 3);
  EXPECT_EQ(r0.num_steps(), 3);
  std::vector<int32_t> joined;
  TokenBatch b0, b1;
  while (r0.next(b0) && r1.next(b1)) {
    joined.insert(joined.end(), b0.inputs.begin(), b0.inputs.end());
    joined.insert(joined.end(), b1.inputs.begin(), b1.inputs.end());
  }
  EXPECT_EQ(joined, std::vector<int32_t>(all.begin(), all.begin() + 3 * 64));
  r0.reset();
  EXPECT_TRUE(r0.next(b0));
  EXPECT_THROW(ValidationIterator(ds, 512, 4, 0, 1), std::invalid_argument);

  // Micro-batches of one sequence: the same windows in the same order, one sequence at a time.
  ValidationIterator micro0(ds, 16, 4, 0, 2, 3, true, 1), micro1(ds, 16, 4, 1, 2, 3, true, 1);
  std::vector<int32_t> in_micro_batches;
  for (int64_t step = 0; step < 3; ++step) {
    for (ValidationIterator* rank : {&micro0, &micro1}) {
      for (int m = 0; m < 2; ++m) {
        ASSERT_TRUE(rank->next(b0));
        EXPECT_EQ(b0.inputs.size(), 16u);
        in_micro_batches.insert(in_micro_batches.end(), b0.inputs.begin(), b0.inputs.end());
      }
    }
  }
  EXPECT_FALSE(micro0.next(b0));
  EXPECT_EQ(in_micro_batches, joined);
  EXPECT_THROW(ValidationIterator(ds, 16, 4, 0, 1, 0, true, 3), std::invalid_argument);  // a share of 4 in 3s
}

}  // namespace
}  // namespace linea::data
