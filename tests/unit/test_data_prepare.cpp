#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/atomic_file.h"
#include "data/compressed_file_reader.h"
#include "data/dataset.h"
#include "data/document_source.h"
#include "data/prepare.h"
#include "tests/testing/error_of.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tiny_gpt2_vocab.h"

namespace linea::data {
namespace {

using testing::error_of;

using testing::TempDir;

// Documents with words, digits, punctuation, newlines and non-ASCII text.
std::vector<std::string> make_documents(int n, int salt) {
  const std::vector<std::string> words = {"river",     "harbour",      "lantern", "quietly", "seven", "north", "copper",
                                          "caf\u00e9", "\u6771\u4eac", "gardens", "whistle", "42",    "the",   "a"};
  std::vector<std::string> docs;
  for (int d = 0; d < n; ++d) {
    std::string doc;
    const int len = 5 + (d * 13 + salt) % 40;
    for (int w = 0; w < len; ++w) {
      if (w) doc += (w % 11 == 0) ? "\n" : (w % 7 == 0 ? ", " : " ");
      doc += words[(d * 31 + w * 17 + salt) % words.size()];
    }
    docs.push_back(doc + ".");
  }
  return docs;
}

std::string jsonl(const std::vector<std::string>& docs) {
  std::string text;
  for (size_t i = 0; i < docs.size(); ++i) {
    text += nlohmann::json{{"id", i}, {"text", docs[i]}}.dump() + "\n";
    if (i == 3) text += "\n";  // blank lines are skipped
  }
  return text;
}

void write_gzip(const std::filesystem::path& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  gzclose(f);
}

void write_zstd(const std::filesystem::path& path, const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3);
  ASSERT_FALSE(ZSTD_isError(n));
  out.resize(n);
  write_file_atomically(path, out);
}

DocumentSourceFactory files_source(std::vector<std::filesystem::path> files,
                                   TextDocuments mode = TextDocuments::paragraph) {
  DocumentOptions options;
  options.text_documents = mode;
  return [files, options] { return std::make_unique<FileDocumentSource>(files, options); };
}

PrepareOptions quiet_options(const std::filesystem::path& output, const std::string& tokenizer) {
  PrepareOptions o;
  o.output = output;
  o.tokenizer = TokenizerChoice::parse(tokenizer);
  o.progress = false;
  return o;
}

// The documents of a split, decoded: the stream is cut before every EOS.
std::vector<std::string> decode_split(const Dataset& ds, Split split) {
  const TokenStream& s = ds.split(split);
  std::vector<int32_t> ids(static_cast<size_t>(s.num_tokens()));
  s.read(0, s.num_tokens(), ids.data());
  const auto tok = ds.tokenizer();
  std::vector<std::string> docs;
  EXPECT_TRUE(ids.empty() || ids[0] == ds.eos_id());
  for (size_t begin = 0; begin < ids.size();) {
    size_t end = begin + 1;
    while (end < ids.size() && ids[end] != ds.eos_id()) ++end;
    docs.push_back(tok->decode(std::span(ids).subspan(begin + 1, end - begin - 1)));
    begin = end;
  }
  return docs;
}

TEST(Prepare, GzipAndZstdJsonlEndToEnd) {
  TempDir dir;
  const auto a = make_documents(40, 1), b = make_documents(40, 2);
  write_gzip(dir / "part-a.jsonl.gz", jsonl(a));
  write_zstd(dir / "part-b.jsonl.zst", jsonl(b));
  PrepareOptions o = quiet_options(dir / "out", "spm-train:400");
  o.val_fraction = 0.1;
  o.shard_tokens = 300;
  o.threads = 2;
  const PrepareSummary summary = prepare_corpus(files_source(expand_inputs({(dir / "part-*.jsonl.*").string()})), o);
  EXPECT_EQ(summary.train_docs, 72);
  EXPECT_EQ(summary.val_docs, 8);

  const auto ds = Dataset::open(dir / "out");
  EXPECT_EQ(ds->manifest().tokenizer.kind, "sentencepiece");
  EXPECT_EQ(ds->vocab_size(), summary.vocab_size);
  EXPECT_EQ(ds->split(Split::train).num_tokens(), summary.train_tokens);
  for (const auto& shard : ds->manifest().shards) {
    const bool last = &shard == &ds->manifest().shards.back() ||
                      (&shard + 1)->split != shard.split;  // the last shard of its split may be short
    if (!last) {
      EXPECT_EQ(shard.tokens, 300) << shard.file;
    }
    EXPECT_EQ(shard.file.rfind(std::string("corpus_") + std::string(split_name(shard.split)) + "_", 0), 0u);
  }
  // Every document comes back, in order, in its split: every 10th document (9, 19, ...) is val.
  std::vector<std::string> all = a, train, val;
  all.insert(all.end(), b.begin(), b.end());
  for (size_t i = 0; i < all.size(); ++i) ((i + 1) % 10 == 0 ? val : train).push_back(all[i]);
  EXPECT_EQ(decode_split(*ds, Split::train), train);
  EXPECT_EQ(decode_split(*ds, Split::val), val);
  // Nothing but the dataset was left beside the output.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 3);
}

TEST(Prepare, OutputDoesNotDependOnThreadCount) {
  TempDir dir;
  write_gzip(dir / "docs.jsonl.gz", jsonl(make_documents(120, 3)));
  const auto source = files_source({dir / "docs.jsonl.gz"});
  prepare_corpus(source, quiet_options(dir / "trained", "spm-train:350"));
  std::vector<std::string> outputs;
  for (int threads : {1, 3}) {
    PrepareOptions o =
        quiet_options(dir / ("t" + std::to_string(threads)), "spm:" + (dir / "trained/tokenizer.model").string());
    o.threads = threads;
    o.shard_tokens = 500;
    o.val_docs = 5;
    prepare_corpus(source, o);
    std::string all;
    for (const auto& entry : std::filesystem::directory_iterator(o.output)) all += entry.path().filename().string();
    const Manifest m = Manifest::load(o.output);
    for (const auto& s : m.shards) all += read_file(o.output / s.file);
    outputs.push_back(all + read_file(o.output / "manifest.json"));
  }
  EXPECT_EQ(outputs[0], outputs[1]);
}

TEST(Prepare, PlainTextWithGpt2Tokenizer) {
  TempDir dir;
  std::filesystem::create_directories(dir / "gpt2");
  testing::write_tiny_gpt2_vocab(dir / "gpt2");
  const std::string book = "the cat sat.\nit was\tcontent.\n\n\n  \nsecond  paragraph\n\nthird one \xc3\xa9\n";
  write_file_atomically(dir / "book.txt", book);

  PrepareOptions o = quiet_options(dir.path().string() + "/para/", "gpt2:" + (dir / "gpt2").string());
  o.val_docs = 1;
  prepare_corpus(files_source({dir / "book.txt"}), o);
  auto ds = Dataset::open(dir / "para");
  EXPECT_EQ(ds->manifest().tokenizer.kind, "gpt2-bpe");
  EXPECT_EQ(ds->vocab_size(), 264);
  EXPECT_EQ(ds->eos_id(), 263);
  EXPECT_EQ(decode_split(*ds, Split::val), std::vector<std::string>{"the cat sat.\nit was\tcontent."});
  EXPECT_EQ(decode_split(*ds, Split::train), (std::vector<std::string>{"second  paragraph", "third one \xc3\xa9"}));

  o.output = dir / "whole";
  o.val_docs = 0;
  prepare_corpus(files_source({dir / "book.txt"}, TextDocuments::file), o);
  ds = Dataset::open(dir / "whole");
  EXPECT_EQ(decode_split(*ds, Split::train), std::vector<std::string>{book});
}

TEST(Prepare, BadInputsAreReportedAndNothingIsOverwritten) {
  TempDir dir;
  write_gzip(dir / "ok.jsonl.gz", jsonl(make_documents(10, 4)));
  const auto source = files_source({dir / "ok.jsonl.gz"});

  std::filesystem::create_directories(dir / "taken");
  write_file_atomically(dir / "taken/keep.txt", "precious");
  EXPECT_NE(error_of([&] {
              prepare_corpus(source, quiet_options(dir / "taken", "spm-train:300"));
            }).find("not an empty directory"),
            std::string::npos);
  EXPECT_EQ(read_file(dir / "taken/keep.txt"), "precious");

  // A truncated gzip file: the error names it, and no output (partial or not) is left behind.
  const std::string gz = read_file(dir / "ok.jsonl.gz");
  write_file_atomically(dir / "cut.jsonl.gz", gz.substr(0, gz.size() / 2));
  const std::string cut = error_of([&] {
    prepare_corpus(files_source({dir / "cut.jsonl.gz"}), quiet_options(dir / "out1", "gpt2:" + dir.path().string()));
  });
  EXPECT_NE(cut.find("vocab.json"), std::string::npos) << cut;  // no tokenizer files there yet
  std::filesystem::create_directories(dir / "gpt2");
  testing::write_tiny_gpt2_vocab(dir / "gpt2");
  const std::string truncated = error_of([&] {
    prepare_corpus(files_source({dir / "cut.jsonl.gz"}),
                   quiet_options(dir / "out1", "gpt2:" + (dir / "gpt2").string()));
  });
  EXPECT_NE(truncated.find("cut.jsonl.gz"), std::string::npos) << truncated;
  EXPECT_FALSE(std::filesystem::exists(dir / "out1"));
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".partial-"), std::string::npos);
  }

  write_file_atomically(dir / "nofield.jsonl", "{\"text\": \"fine\"}\n{\"body\": \"wrong field\"}\n");
  const std::string nofield = error_of([&] {
    prepare_corpus(files_source({dir / "nofield.jsonl"}),
                   quiet_options(dir / "out2", "gpt2:" + (dir / "gpt2").string()));
  });
  EXPECT_NE(nofield.find("nofield.jsonl line 2"), std::string::npos) << nofield;
  EXPECT_NE(nofield.find("\"text\""), std::string::npos) << nofield;

  PrepareOptions both = quiet_options(dir / "out3", "spm-train:300");
  both.val_docs = 1;
  both.val_fraction = 0.5;
  EXPECT_THROW(prepare_corpus(source, both), std::invalid_argument);
  EXPECT_THROW(TokenizerChoice::parse("spm-train:12x"), std::invalid_argument);
  EXPECT_THROW(TokenizerChoice::parse("bpe:/x"), std::invalid_argument);
  EXPECT_THROW(TokenizerChoice::parse("gpt2:"), std::invalid_argument);
}

TEST(CompressedFileReader, DetectsFormatByMagicAndRejectsTruncation) {
  TempDir dir;
  const std::string text = jsonl(make_documents(50, 5));
  write_gzip(dir / "named.txt", text);  // gzip despite the name
  write_zstd(dir / "data.zst", text);
  write_file_atomically(dir / "plain.gz", text);  // plain despite the name
  EXPECT_EQ(CompressedFileReader(dir / "named.txt").compression(), Compression::gzip);
  EXPECT_EQ(CompressedFileReader(dir / "data.zst").compression(), Compression::zstd);
  EXPECT_EQ(CompressedFileReader(dir / "plain.gz").compression(), Compression::none);
  for (const char* name : {"named.txt", "data.zst", "plain.gz"}) EXPECT_EQ(read_decompressed(dir / name), text);

  const std::string zst = read_file(dir / "data.zst");
  write_file_atomically(dir / "cut.zst", zst.substr(0, zst.size() - 7));
  const std::string error = error_of([&] { read_decompressed(dir / "cut.zst"); });
  EXPECT_NE(error.find("cut.zst"), std::string::npos) << error;
  EXPECT_NE(error.find("zstd"), std::string::npos) << error;

  EXPECT_TRUE(is_jsonl_name("a/b.jsonl.zst"));
  EXPECT_TRUE(is_jsonl_name("b.json.gz"));
  EXPECT_FALSE(is_jsonl_name("b.txt.gz"));
}

TEST(ExpandInputs, GlobsAreSortedAndMistakesNamed) {
  TempDir dir;
  for (const char* name : {"b.txt", "a.txt", "c.md"}) write_file_atomically(dir / name, "x");
  const auto files = expand_inputs({(dir / "*.txt").string(), (dir / "a.txt").string(), (dir / "c.md").string()});
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].filename(), "a.txt");
  EXPECT_EQ(files[1].filename(), "b.txt");
  EXPECT_EQ(files[2].filename(), "c.md");
  EXPECT_NE(error_of([&] { expand_inputs({(dir / "*.json").string()}); }).find("matches no file"), std::string::npos);
  EXPECT_NE(error_of([&] { expand_inputs({(dir / "missing.txt").string()}); }).find("missing.txt"), std::string::npos);
}

}  // namespace
}  // namespace linea::data
