// Where `prepare` gets its documents. A DocumentSource yields documents one at a time, in a fixed
// order; FileDocumentSource reads a list of files, each decompressed as compressed_file_reader.h
// says, in one of two formats chosen by the file name (with any .gz/.zst/.zstd suffix removed):
//   *.jsonl, *.json, *.ndjson: one JSON object per line, the document is its `text_field` string
//                              (FineWeb-Edu dumps); blank lines are skipped;
//   anything else, plain text: by default one document per paragraph (a run of lines ended by a
//                              blank line, joined with '\n'); with TextDocuments::file the whole
//                              file, byte for byte, is one document.
// Empty documents are skipped. Errors name the file and line.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/compressed_file_reader.h"

namespace linea::data {

class DocumentSource {
 public:
  virtual ~DocumentSource() = default;
  // Stores the next document in `doc`; false when there are no more.
  virtual bool next(std::string& doc) = 0;
};

// Makes a fresh source positioned at the first document (`prepare` may read the documents twice).
using DocumentSourceFactory = std::function<std::unique_ptr<DocumentSource>()>;

enum class TextDocuments : uint8_t { paragraph, file };

class FileDocumentSource : public DocumentSource {
 public:
  FileDocumentSource(std::vector<std::filesystem::path> files, TextDocuments text_documents,
                     std::string text_field = "text");
  bool next(std::string& doc) override;

 private:
  bool next_json_line(std::string& doc);
  bool next_paragraph(std::string& doc);
  std::vector<std::filesystem::path> files_;
  TextDocuments text_documents_;
  std::string text_field_;
  size_t file_index_ = 0;
  std::unique_ptr<LineReader> lines_;
  bool jsonl_ = false;
  std::string line_;
};

// True when the name (compression suffix removed) ends in .jsonl, .json or .ndjson.
bool is_jsonl_name(const std::filesystem::path& path);

// Expands files and glob patterns (sorted matches) into a list of files, in argument order,
// without duplicates. Throws std::invalid_argument naming a pattern that matches nothing or a
// path that is not a regular file.
std::vector<std::filesystem::path> expand_inputs(const std::vector<std::string>& patterns);

}  // namespace linea::data
