// ParquetFile: a focused reader of parquet files (no Apache Arrow in Debian): the footer, then one
// flat column of one row group at a time (row groups are independent, so several threads may read
// different ones of the same ParquetFile at once). What it reads:
//   columns that are top-level leaves (REQUIRED or OPTIONAL; nested columns elsewhere in the schema
//   are fine), BYTE_ARRAY as strings, INT32 / INT64 / FLOAT / DOUBLE as numbers;
//   data pages v1 and v2 and dictionary pages; PLAIN, PLAIN_DICTIONARY and RLE_DICTIONARY values;
//   RLE/bit-packed definition levels (nulls); codecs as parquet_codecs.h says.
// Anything else (other encodings, codecs, encryption, external column chunks, repeated or nested
// columns asked for) and every inconsistency of a corrupt file (offsets outside the file, sizes
// that do not add up, dictionary indices out of range, ...) throws std::runtime_error naming the
// file, the row group and column where there is one, and the feature or the fault. All reads are
// bounds-checked. The file is memory-mapped read-only.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "data/parquet_metadata.h"

namespace linea::data {

// One row group's values of a string column, nulls included.
struct StringColumn {
  std::string bytes;           // the values, back to back
  std::vector<uint64_t> ends;  // value i is bytes[ends[i - 1], ends[i]) (ends[-1] = 0)
  std::vector<uint8_t> valid;  // 0: null
  size_t size() const { return ends.size(); }
  std::string_view value(size_t i) const {
    const uint64_t begin = i == 0 ? 0 : ends[i - 1];
    return std::string_view(bytes).substr(begin, ends[i] - begin);
  }
};

// One row group's values of a numeric column as doubles (an INT64 beyond 2^53 is rounded), nulls 0.
struct NumberColumn {
  std::vector<double> values;
  std::vector<uint8_t> valid;
  size_t size() const { return values.size(); }
};

class ParquetFile {
 public:
  explicit ParquetFile(std::filesystem::path path);
  ~ParquetFile();
  ParquetFile(const ParquetFile&) = delete;
  ParquetFile& operator=(const ParquetFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  int64_t num_rows() const { return meta_.num_rows; }
  int num_row_groups() const { return static_cast<int>(meta_.row_groups.size()); }
  int64_t row_group_rows(int group) const { return meta_.row_groups.at(group).num_rows; }
  // The row group's uncompressed size as its metadata states it.
  int64_t row_group_bytes(int group) const { return meta_.row_groups.at(group).total_byte_size; }
  // Top-level column names, in schema order.
  std::vector<std::string> column_names() const;

  // The leaf index of top-level column `name`, to pass to read_*(). Throws naming the file and the
  // column when there is no such column, it is nested or repeated, or of another kind.
  int string_column(const std::string& name) const;
  int number_column(const std::string& name) const;

  void read_strings(int group, int column, StringColumn& out) const;
  void read_numbers(int group, int column, NumberColumn& out) const;

 private:
  struct Leaf {
    std::string name;  // dotted path
    int32_t type = 0;
    int max_definition = 0;  // OPTIONAL fields on the path
    bool flat = false;       // a top-level, non-repeated leaf
  };
  [[noreturn]] void fail(const std::string& what) const;
  void read_schema();
  int column(const std::string& name, std::initializer_list<int32_t> types, const char* kind) const;
  template <class Value, class Column>
  void read_chunk(int group, int column, Column& out) const;

  std::filesystem::path path_;
  const uint8_t* map_ = nullptr;
  size_t size_ = 0;
  size_t footer_start_ = 0;
  parquet::FileMetaData meta_;
  std::vector<Leaf> leaves_;
};

}  // namespace linea::data
