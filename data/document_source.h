// Where `prepare` gets its documents. A DocumentSource yields documents one at a time, in a fixed
// order; FileDocumentSource reads a list of files in one of three formats chosen by the file name
// (with any .gz/.zst/.zstd suffix removed; those are decompressed as compressed_file_reader.h says):
//   *.parquet:                 the strings of column `text_field` (parquet_documents.h; FineWeb-Edu
//                              as published), row groups decoded `threads` at a time;
//   *.jsonl, *.json, *.ndjson: one JSON object per line, the document is its `text_field` string
//                              (FineWeb-Edu dumps); blank lines are skipped;
//   anything else, plain text: by default one document per paragraph (a run of lines ended by a
//                              blank line, joined with '\n'); with TextDocuments::file the whole
//                              file, byte for byte, is one document.
// `filter` (row_filter.h) keeps the parquet rows and JSON records whose numeric fields pass it;
// plain text has no fields, so a filter with plain-text inputs is an error. Empty documents are
// skipped. Errors name the file and line.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/compressed_file_reader.h"
#include "data/parquet_documents.h"
#include "data/row_filter.h"

namespace linea::data {

class DocumentSource {
 public:
  virtual ~DocumentSource() = default;
  // Stores the next document in `doc`; false when there are no more.
  virtual bool next(std::string& doc) = 0;
  // How much of the input has been read, in [0, 1]; negative when unknown (for progress and ETA).
  virtual double fraction_read() const { return -1; }
};

// Makes a fresh source positioned at the first document (`prepare` may read the documents twice).
using DocumentSourceFactory = std::function<std::unique_ptr<DocumentSource>()>;

enum class TextDocuments : uint8_t { paragraph, file };

struct DocumentOptions {
  TextDocuments text_documents = TextDocuments::paragraph;
  std::string text_field = "text";  // JSONL field or parquet column
  RowFilter filter;
  int threads = 1;  // parquet row groups decoded at once
};

class FileDocumentSource : public DocumentSource {
 public:
  // Throws std::invalid_argument when a filter is given with plain-text files.
  FileDocumentSource(std::vector<std::filesystem::path> files, DocumentOptions options = {});
  ~FileDocumentSource() override;
  bool next(std::string& doc) override;
  double fraction_read() const override;

 private:
  bool next_json_line(std::string& doc);
  bool next_paragraph(std::string& doc);
  std::vector<std::filesystem::path> files_;
  std::vector<int64_t> sizes_;  // bytes of each file
  int64_t total_bytes_ = 0, done_bytes_ = 0;
  DocumentOptions options_;
  size_t file_index_ = 0;
  std::unique_ptr<LineReader> lines_;
  std::unique_ptr<ParquetDocuments> parquet_;
  bool jsonl_ = false;
  std::string line_;
};

// True when the name (compression suffix removed) ends in .jsonl, .json or .ndjson.
bool is_jsonl_name(const std::filesystem::path& path);
// True when the name ends in .parquet.
bool is_parquet_name(const std::filesystem::path& path);

// Expands files and glob patterns (sorted matches) into a list of files, in argument order,
// without duplicates. Throws std::invalid_argument naming `flag`, and a pattern that matches nothing
// or a path that is not a regular file.
std::vector<std::filesystem::path> expand_inputs(const std::vector<std::string>& patterns,
                                                 const std::string& flag = "--input");

}  // namespace linea::data
