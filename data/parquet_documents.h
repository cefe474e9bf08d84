// ParquetDocuments: the documents of a list of parquet files, in order (files as given, row groups,
// rows): the strings of the text column (ParquetOptions::text_column) of the rows that pass the
// filter, nulls and empty strings skipped. Row groups are decoded `threads` at a time in parallel
// (as many as fit in `batch_bytes` of uncompressed data, at least one), so memory holds about that
// many row groups. Every document comes with its location (file, row group, row), and seek()
// continues from a location: how a streaming run resumes (streaming_loader.h).
#pragma once
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data/parquet_file.h"
#include "data/row_filter.h"

namespace linea::data {

struct ParquetOptions {
  std::string text_column = "text";
  RowFilter filter;
  int threads = 1;
  int64_t batch_bytes = 1 << 30;
};

struct DocumentLocation {
  int64_t file = 0;  // index in the file list
  int64_t row_group = 0;
  int64_t row = 0;  // within the row group
  bool operator==(const DocumentLocation&) const = default;
};

class ParquetDocuments {
 public:
  ParquetDocuments(std::vector<std::filesystem::path> files, ParquetOptions options);
  ~ParquetDocuments();
  // The next document and where it is; false after the last one.
  bool next(std::string& doc, DocumentLocation& where);
  // Continues at the first document at or after `where`. Throws naming the file when it has no
  // such row group.
  void seek(const DocumentLocation& where);
  const std::vector<std::filesystem::path>& files() const { return files_; }
  // The share of the current file's row groups decoded so far.
  double fraction_of_file() const {
    return file_ && file_->num_row_groups() > 0 ? static_cast<double>(next_group_) / file_->num_row_groups() : 0;
  }

 private:
  struct Decoded;  // one row group's texts and the rows kept
  bool fill();     // decodes the next batch of row groups; false at the end
  void open_file(int64_t index);

  std::vector<std::filesystem::path> files_;
  ParquetOptions options_;
  std::unique_ptr<ParquetFile> file_;  // files_[file_index_]
  int64_t file_index_ = -1;
  int64_t next_group_ = 0;  // of file_, the first not decoded yet
  std::deque<std::unique_ptr<Decoded>> ready_;
  size_t ready_row_ = 0;  // in ready_.front()
};

}  // namespace linea::data
