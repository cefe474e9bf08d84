#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/default_corpus.h"
#include "data/dictd_database.h"
#include "tests/testing/temp_dir.h"

namespace linea::data {
namespace {

using testing::TempDir;

void write_gzip(const std::filesystem::path& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
}

TEST(Dictd, Base64Numbers) {
  EXPECT_EQ(decode_dictd_number("A"), 0);
  EXPECT_EQ(decode_dictd_number("BA"), 64);
  EXPECT_EQ(decode_dictd_number("5I"), 3656);  // gcide.index's first entry: 52 + 5 = 57, 57 · 64 + 8
  EXPECT_EQ(decode_dictd_number("/"), 63);
  EXPECT_THROW(decode_dictd_number("a-b"), std::invalid_argument);
  EXPECT_THROW(decode_dictd_number(""), std::invalid_argument);
}

TEST(Dictd, EntriesAreDistinctBlocksInFileOrder) {
  TempDir dir;
  const std::string dict = "info block\napple \\ap\"ple\\, n.\n   A fruit.\n\nbanana, n.\n   Another.\n";
  // "info block\n" is [0, 11) = (A, L); apple [11, 43) = (L, g); banana [43, 66) = (r, X).
  write_gzip(dir / "x.dict.dz", dict);
  write_text(dir / "x.index", "apple\tL\tg\nbanana\tr\tX!\n");
  EXPECT_THROW(DictdDatabase(dir / "x.index", dir / "x.dict.dz"), std::runtime_error);  // '!' is no digit
  write_text(dir / "x.index", "00-database-info\tA\tL\nbanana\tr\tX\napple\tL\tg\nApple\tL\tg\n");
  const DictdDatabase db(dir / "x.index", dir / "x.dict.dz");
  ASSERT_EQ(db.entries().size(), 2u);  // the 00- record left out, "Apple" shares apple's block
  EXPECT_EQ(db.entries()[0].headword, "apple");
  EXPECT_EQ(db.text(db.entries()[0]), "apple \\ap\"ple\\, n.\n   A fruit.\n\n");
  EXPECT_EQ(db.text(db.entries()[1]), "banana, n.\n   Another.\n");

  write_text(dir / "x.index", "apple\tL\tg\nbanana\tr\tY\n");  // one byte past the end
  try {
    DictdDatabase bad(dir / "x.index", dir / "x.dict.dz");
    ADD_FAILURE() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("x.index line 2"), std::string::npos) << e.what();
  }
}

TEST(DefaultCorpus, GcideEntriesBecomeCleanDocuments) {
  const std::string entry =
      "Dichotomize \\Di*chot\"o*mize\\, v. t. [imp. & p. p.\n"
      "   {Dichotomized}.] [See\n"
      "   {Dichotomous}.]\n"
      "   1. To cut into two parts;   to part.\n"
      "      [1913 Webster]\n"
      "\n"
      "            The apostolical benediction.          --Bp. Hall.\n"
      "      [1913 Webster]\n"
      "\n"
      "   2. (Astron.) To exhibit as a half disk. [R.]\n"
      "      [Webster 1913 Suppl.]\n\n";
  EXPECT_EQ(gcide_document(entry),
            "Dichotomize \\Di*chot\"o*mize\\, v. t. [imp. & p. p. {Dichotomized}.] [See {Dichotomous}.] 1. To cut "
            "into two parts; to part.\n"
            "The apostolical benediction. --Bp. Hall.\n"
            "2. (Astron.) To exhibit as a half disk. [R.]");
  EXPECT_EQ(gcide_document("  \n[WordNet 1.5]\n"), "");
}

TEST(DefaultCorpus, BuildsOnceIntoTheCacheDirectory) {
  DefaultCorpusOptions options;
  if (!std::filesystem::exists(options.dict_file) || !std::filesystem::exists(options.index_file)) {
    GTEST_SKIP() << "dict-gcide is not installed";
  }
  TempDir cache;
  options.dir = cache / "gcide-spm4096";
  options.max_documents = 3000;  // a slice keeps the test fast; the full build is measured in bench/
  options.progress = false;
  options.threads = 2;
  EXPECT_EQ(ensure_default_corpus(options), options.dir);
  const auto ds = Dataset::open(options.dir);
  EXPECT_LE(ds->vocab_size(), 4096);
  EXPECT_GT(ds->vocab_size(), 1000);
  EXPECT_GT(ds->split(Split::train).num_tokens(), 100000);
  EXPECT_GT(ds->split(Split::val).num_tokens(), 500);
  // The text decodes back to dictionary prose.
  std::vector<int32_t> ids(200);
  ds->split(Split::train).read(0, 200, ids.data());
  EXPECT_EQ(ids[0], ds->eos_id());
  const std::string text = ds->tokenizer()->decode(std::span(ids).subspan(1));
  EXPECT_GT(std::count(text.begin(), text.end(), ' '), 20) << text;
  // A second call finds it ready and leaves it alone.
  const auto stamp = std::filesystem::last_write_time(options.dir / "manifest.json");
  options.max_documents = 10;
  EXPECT_EQ(ensure_default_corpus(options), options.dir);
  EXPECT_EQ(std::filesystem::last_write_time(options.dir / "manifest.json"), stamp);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(cache.path()), {}), 1);
}

}  // namespace
}  // namespace linea::data
