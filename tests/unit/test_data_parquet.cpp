// The parquet reader against files written by pyarrow (tests/data/parquet, made by
// tests/data/make_fixtures.py): every codec, dictionary and plain, page v1 and v2, nulls, nested
// columns beside flat ones; the errors for what it does not read; corrupt bytes never crash it.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "data/atomic_file.h"
#include "data/compressed_file_reader.h"
#include "data/parquet_documents.h"
#include "data/parquet_file.h"
#include "data/row_filter.h"
#include "tests/testing/error_of.h"
#include "tests/testing/fixtures.h"
#include "tests/testing/temp_dir.h"

namespace linea::data {
namespace {

using nlohmann::json;
using testing::error_of;
using testing::fixture_dir;

std::filesystem::path parquet_dir() { return fixture_dir() / "parquet"; }

const json& expected() {
  static const json e = json::parse(read_decompressed(parquet_dir() / "expected.json.gz"));
  return e;
}

// The values pyarrow reads back from `file`.
const json& table_of(const std::string& file) {
  return expected()["tables"][expected()["files"][file]["table"].get<std::string>()];
}

std::vector<std::string> readable_files() {
  std::vector<std::string> files;
  for (const auto& [name, info] : expected()["files"].items()) {
    if (info["expect"] == "ok") files.push_back(name);
  }
  return files;
}

void expect_column(const ParquetFile& file, const std::string& name, const json& values) {
  SCOPED_TRACE(file.path().string() + " column " + name);
  bool strings = false;
  for (const json& v : values) strings = strings || v.is_string();
  std::vector<json> got;
  for (int g = 0; g < file.num_row_groups(); ++g) {
    if (strings) {
      StringColumn c;
      file.read_strings(g, file.string_column(name), c);
      ASSERT_EQ(static_cast<int64_t>(c.size()), file.row_group_rows(g));
      for (size_t i = 0; i < c.size(); ++i) got.push_back(c.valid[i] ? json(std::string(c.value(i))) : json());
    } else {
      NumberColumn c;
      file.read_numbers(g, file.number_column(name), c);
      ASSERT_EQ(static_cast<int64_t>(c.size()), file.row_group_rows(g));
      for (size_t i = 0; i < c.size(); ++i) got.push_back(c.valid[i] ? json(c.values[i]) : json());
    }
  }
  ASSERT_EQ(got.size(), values.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (values[i].is_number()) {
      ASSERT_TRUE(got[i].is_number()) << "row " << i;
      EXPECT_EQ(got[i].get<double>(), values[i].get<double>()) << "row " << i;
    } else {
      EXPECT_EQ(got[i], values[i]) << "row " << i;
    }
  }
}

TEST(ParquetFile, DecodesExactlyWhatPyarrowWrote) {
  const auto files = readable_files();
  ASSERT_GE(files.size(), 19u);  // 16 codec × dictionary × page-version files and the special ones
  for (const auto& name : files) {
    const ParquetFile file(parquet_dir() / name);
    const json& table = table_of(name);
    EXPECT_EQ(file.num_rows(), expected()["files"][name]["rows"].get<int64_t>()) << name;
    for (const auto& [column, values] : table.items()) {
      if (values.empty()) continue;
      expect_column(file, column, values);
    }
  }
}

TEST(ParquetFile, FixturesCoverEveryCodecEncodingAndPageVersion) {
  // What pyarrow reports about the files (when the fixtures were made on a machine with pyarrow).
  const json& files = expected()["files"];
  std::set<std::string> codecs, encodings;
  for (const auto& [name, info] : files.items()) {
    if (info["expect"] != "ok") continue;
    for (const auto& g : info["row_groups"]) {
      for (const auto& [column, chunk] : g["columns"].items()) {
        if (column != "text") continue;
        codecs.insert(chunk["codec"].get<std::string>());
        for (const auto& e : chunk["encodings"]) encodings.insert(e.get<std::string>());
      }
    }
  }
  EXPECT_EQ(codecs, (std::set<std::string>{"UNCOMPRESSED", "SNAPPY", "GZIP", "ZSTD"}));
  EXPECT_TRUE(encodings.count("PLAIN") && encodings.count("RLE_DICTIONARY") && encodings.count("RLE"));
  EXPECT_GE(files["none_dict_v1.parquet"]["row_groups"].size(), 4u);
}

TEST(ParquetFile, ColumnErrorsNameTheFileAndTheColumn) {
  const ParquetFile file(parquet_dir() / "nested_columns.parquet");
  EXPECT_NE(error_of([&] { file.string_column("tags"); }).find("column \"tags\" is nested"), std::string::npos);
  EXPECT_NE(error_of([&] { file.string_column("meta"); }).find("nested"), std::string::npos);
  const std::string missing = error_of([&] { file.string_column("body"); });
  EXPECT_NE(missing.find("nested_columns.parquet"), std::string::npos) << missing;
  EXPECT_NE(missing.find("no column \"body\" (the file has: tags, text, meta, int_score)"), std::string::npos)
      << missing;
  EXPECT_NE(error_of([&] { file.string_column("int_score"); }).find("physical type INT64; expected BYTE_ARRAY"),
            std::string::npos);
  EXPECT_NE(error_of([&] { file.number_column("text"); }).find("expected INT32, INT64, FLOAT or DOUBLE"),
            std::string::npos);
}

TEST(ParquetFile, UnsupportedFeaturesAreNamed) {
  for (const auto& [name, info] : expected()["files"].items()) {
    const std::string expect = info["expect"];
    if (expect.rfind("error: ", 0) != 0) continue;
    const std::string feature = expect.substr(7);
    const std::string message = error_of([&] {
      ParquetDocuments docs({parquet_dir() / name}, {});
      std::string doc;
      DocumentLocation at;
      while (docs.next(doc, at)) {
      }
    });
    EXPECT_NE(message.find(name), std::string::npos) << message;
    EXPECT_NE(message.find(feature), std::string::npos) << message;
    if (feature != "text") {
      EXPECT_NE(message.find("row group 0, column \"text\": unsupported"), std::string::npos) << message;
    }
  }
}

TEST(ParquetFile, NotParquetOrTruncatedIsAClearError) {
  const testing::TempDir dir;
  const std::string bytes = read_file(parquet_dir() / "snappy_dict_v1.parquet");
  const auto write = [&](const std::string& name, const std::string& content) {
    std::ofstream(dir / name, std::ios::binary) << content;
    return dir / name;
  };
  EXPECT_NE(error_of([&] { ParquetFile f(write("short", "PAR1")); }).find("too short"), std::string::npos);
  EXPECT_NE(error_of([&] { ParquetFile f(write("text", std::string(100, 'x'))); }).find("PAR1"), std::string::npos);
  EXPECT_NE(error_of([&] { ParquetFile f(write("cut", bytes.substr(0, bytes.size() / 2))); }).find("cut"),
            std::string::npos);
  std::string long_footer = bytes;
  long_footer[long_footer.size() - 5] = '\x7f';
  EXPECT_NE(error_of([&] { ParquetFile f(write("footer", long_footer)); }).find("footer"), std::string::npos);
  EXPECT_NE(error_of([&] { ParquetFile f(dir / "absent.parquet"); }).find("cannot open"), std::string::npos);
}

// The documents of a file: the texts in order, nulls and empty strings skipped.
std::vector<std::string> expected_documents(const json& table, const RowFilter& filter = {}) {
  std::vector<std::string> docs;
  for (size_t i = 0; i < table["text"].size(); ++i) {
    const json& t = table["text"][i];
    if (!t.is_string() || t.get<std::string>().empty()) continue;
    bool keep = true;
    for (const auto& c : filter.conditions()) {
      const json& v = table[c.field][i];
      keep = keep && v.is_number() && c.holds(v.get<double>());
    }
    if (keep) docs.push_back(t);
  }
  return docs;
}

std::vector<std::string> read_documents(ParquetDocuments& docs, std::vector<DocumentLocation>* locations = nullptr) {
  std::vector<std::string> out;
  std::string doc;
  DocumentLocation at;
  while (docs.next(doc, at)) {
    out.push_back(doc);
    if (locations) locations->push_back(at);
  }
  return out;
}

TEST(ParquetDocuments, YieldsTheTextsInOrderWithAnyThreadCount) {
  const json& table = table_of("zstd_dict_v2.parquet");
  for (int threads : {1, 3}) {
    ParquetOptions options;
    options.threads = threads;
    options.batch_bytes = 1;  // one row group at a time unless threads allow more
    ParquetDocuments docs({parquet_dir() / "zstd_dict_v2.parquet", parquet_dir() / "empty.parquet",
                           parquet_dir() / "gzip_plain_v1.parquet"},
                          options);
    auto want = expected_documents(table);
    const auto second = expected_documents(table_of("gzip_plain_v1.parquet"));
    want.insert(want.end(), second.begin(), second.end());
    EXPECT_EQ(read_documents(docs), want) << threads << " threads";
  }
}

TEST(ParquetDocuments, WhereFiltersOnNumericColumnsAndNullsFail) {
  const RowFilter filter = RowFilter::parse({"int_score>=3", "score < 4.5,token_count!=17"});
  ASSERT_EQ(filter.conditions().size(), 3u);
  EXPECT_EQ(filter.text(), "int_score>=3,score<4.5,token_count!=17");
  for (const char* name : {"snappy_dict_v1.parquet", "none_plain_v2.parquet"}) {
    ParquetOptions options;
    options.filter = filter;
    options.threads = 2;
    ParquetDocuments docs({parquet_dir() / name}, options);
    const auto want = expected_documents(table_of(name), filter);
    EXPECT_GT(want.size(), 5u);
    EXPECT_LT(want.size(), expected_documents(table_of(name)).size());
    EXPECT_EQ(read_documents(docs), want) << name;
  }
  ParquetOptions missing;
  missing.filter = RowFilter::parse({"quality>1"});
  const std::string message = error_of([&] { ParquetDocuments({parquet_dir() / "empty.parquet"}, missing).seek({}); });
  EXPECT_NE(message.find("no column \"quality\""), std::string::npos) << message;
}

TEST(ParquetDocuments, SeekContinuesAtALocation) {
  ParquetOptions options;
  options.threads = 2;
  const std::vector<std::filesystem::path> files = {parquet_dir() / "snappy_plain_v1.parquet",
                                                    parquet_dir() / "zstd_dict_v1.parquet"};
  ParquetDocuments all(files, options);
  std::vector<DocumentLocation> at;
  const auto docs = read_documents(all, &at);
  for (size_t k : {size_t{0}, size_t{7}, docs.size() / 2, docs.size() - 1}) {
    ParquetDocuments resumed(files, options);
    resumed.seek(at[k]);
    const auto rest = read_documents(resumed);
    EXPECT_EQ(rest, std::vector<std::string>(docs.begin() + static_cast<int64_t>(k), docs.end())) << k;
  }
  ParquetDocuments end(files, options);
  end.seek({2, 0, 0});
  EXPECT_TRUE(read_documents(end).empty());
  EXPECT_NE(error_of([&] {
              ParquetDocuments(files, options).seek({0, 99, 0});
            }).find("no row 0 in row group 99"),
            std::string::npos);
}

TEST(RowFilter, BadExpressionsNameTheCondition) {
  EXPECT_NE(error_of([] { RowFilter::parse({"int_score"}); }).find("no comparison operator"), std::string::npos);
  EXPECT_NE(error_of([] { RowFilter::parse({">=3"}); }).find("no field name"), std::string::npos);
  EXPECT_NE(error_of([] { RowFilter::parse({"a>=x"}); }).find("\"x\" is not a number"), std::string::npos);
  EXPECT_NE(error_of([] { RowFilter::parse({"a=>3"}); }).find("unknown operator"), std::string::npos);
  EXPECT_NE(error_of([] { RowFilter::parse({"a>1,,b<2"}); }).find("empty condition"), std::string::npos);
  const RowFilter f = RowFilter::parse({"a==2.5", "b<0"});
  EXPECT_TRUE(f.conditions()[0].holds(2.5));
  EXPECT_FALSE(f.conditions()[0].holds(2.4));
  EXPECT_TRUE(f.conditions()[1].holds(-1));
}

// Reads every column of every row group; any outcome but a crash or a hang is fine.
void read_everything(const std::filesystem::path& path) {
  try {
    const ParquetFile file(path);
    for (int g = 0; g < file.num_row_groups(); ++g) {
      for (const auto& name : file.column_names()) {
        try {
          StringColumn s;
          file.read_strings(g, file.string_column(name), s);
        } catch (const std::exception&) {
        }
        try {
          NumberColumn n;
          file.read_numbers(g, file.number_column(name), n);
        } catch (const std::exception&) {
        }
      }
    }
  } catch (const std::exception&) {
  }
}

// Mutated fixture bytes: random bytes set, bits flipped, runs zeroed or copied, the file cut. Half
// the mutations land in the last 300 bytes (footer) or the first 300 (first pages), where headers
// and lengths are.
TEST(ParquetFile, FuzzedBytesNeverCrash) {
  const testing::TempDir dir;
  std::mt19937_64 rng(20);
  int mutations = 0;
  for (const char* name : {"snappy_dict_v1.parquet", "gzip_plain_v2.parquet", "zstd_dict_v2.parquet",
                           "none_plain_v1.parquet", "nested_columns.parquet", "dictionary_fallback.parquet"}) {
    const std::string original = read_file(parquet_dir() / name);
    for (int round = 0; round < 250; ++round, ++mutations) {
      std::string bytes = original;
      const auto position = [&] {
        const size_t n = bytes.size();
        switch (rng() % 3) {
          case 0: return static_cast<size_t>(rng() % n);
          case 1: return n - 1 - static_cast<size_t>(rng() % std::min<size_t>(n, 300));
          default: return static_cast<size_t>(rng() % std::min<size_t>(n, 300));
        }
      };
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        const size_t at = position();
        switch (rng() % 5) {
          case 0: bytes[at] = static_cast<char>(rng()); break;
          case 1: bytes[at] ^= static_cast<char>(1u << (rng() % 8)); break;
          case 2: bytes[at] = static_cast<char>((rng() % 2) ? 0xFF : 0x00); break;
          case 3:
            bytes.replace(at, std::min<size_t>(8, bytes.size() - at), std::min<size_t>(8, bytes.size() - at), '\0');
            break;
          default: bytes.resize(std::max<size_t>(at, 1)); break;
        }
      }
      const auto path = dir / "fuzzed.parquet";
      std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
      read_everything(path);
    }
  }
  EXPECT_EQ(mutations, 1500);
}

}  // namespace
}  // namespace linea::data
