#include "data/document_source.h"

#include <glob.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

namespace linea::data {

namespace {

bool is_blank(const std::string& line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); });
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

bool is_parquet_name(const std::filesystem::path& path) { return ends_with(path.filename().string(), ".parquet"); }

bool is_jsonl_name(const std::filesystem::path& path) {
  std::string name = path.filename().string();
  for (const char* suffix : {".gz", ".zst", ".zstd"}) {
    if (ends_with(name, suffix)) name.resize(name.size() - std::string(suffix).size());
  }
  return ends_with(name, ".jsonl") || ends_with(name, ".json") || ends_with(name, ".ndjson");
}

FileDocumentSource::FileDocumentSource(std::vector<std::filesystem::path> files, DocumentOptions options)
    : files_(std::move(files)), options_(std::move(options)) {
  for (const auto& f : files_) {
    if (!options_.filter.empty() && !is_parquet_name(f) && !is_jsonl_name(f)) {
      throw std::invalid_argument("--where " + options_.filter.text() + ": input " + f.string() +
                                  " is plain text, which has no fields to filter on (use parquet or JSONL inputs)");
    }
    std::error_code ec;
    const auto size = std::filesystem::file_size(f, ec);
    sizes_.push_back(ec ? 0 : static_cast<int64_t>(size));
    total_bytes_ += sizes_.back();
  }
}

FileDocumentSource::~FileDocumentSource() = default;

double FileDocumentSource::fraction_read() const {
  if (total_bytes_ == 0) return -1;
  double current = 0;
  if (file_index_ > 0 && (lines_ || parquet_)) {
    const double size = static_cast<double>(sizes_[file_index_ - 1]);
    const double within =
        lines_ ? static_cast<double>(lines_->raw_position()) / std::max(1.0, size) : parquet_->fraction_of_file();
    current = std::min(1.0, within) * size;
  }
  return (static_cast<double>(done_bytes_) + current) / static_cast<double>(total_bytes_);
}

bool FileDocumentSource::next(std::string& doc) {
  for (;;) {
    if (!lines_ && !parquet_) {
      if (file_index_ == files_.size()) return false;
      if (file_index_ > 0) done_bytes_ += sizes_[file_index_ - 1];
      const std::filesystem::path& file = files_[file_index_++];
      if (is_parquet_name(file)) {
        ParquetOptions p;
        p.text_column = options_.text_field;
        p.filter = options_.filter;
        p.threads = options_.threads;
        parquet_ = std::make_unique<ParquetDocuments>(std::vector<std::filesystem::path>{file}, p);
        continue;
      }
      jsonl_ = is_jsonl_name(file);
      if (!jsonl_ && options_.text_documents == TextDocuments::file) {
        doc = read_decompressed(file);
        if (!is_blank(doc)) return true;
        continue;
      }
      lines_ = std::make_unique<LineReader>(file);
    }
    if (parquet_) {
      DocumentLocation at;
      if (parquet_->next(doc, at)) return true;
      parquet_.reset();
      continue;
    }
    if (jsonl_ ? next_json_line(doc) : next_paragraph(doc)) return true;
    lines_.reset();
  }
}

bool FileDocumentSource::next_json_line(std::string& doc) {
  while (lines_->next(line_)) {
    if (is_blank(line_)) continue;
    const auto where = [&] {
      return "input " + lines_->path().string() + " line " + std::to_string(lines_->line_number());
    };
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line_);
    } catch (const nlohmann::json::parse_error& e) {
      throw std::runtime_error(where() + ": not valid JSON (" + e.what() + ")");
    }
    const auto field = record.is_object() ? record.find(options_.text_field) : record.end();
    if (field == record.end() || !field->is_string()) {
      throw std::runtime_error(where() + ": expected a JSON object with a string field \"" + options_.text_field +
                               "\"");
    }
    bool keep = true;
    for (const RowCondition& c : options_.filter.conditions()) {
      const auto value = record.find(c.field);
      keep = keep && value != record.end() && value->is_number() && c.holds(value->get<double>());
    }
    if (!keep) continue;
    doc = field->get<std::string>();
    if (!doc.empty()) return true;
  }
  return false;
}

bool FileDocumentSource::next_paragraph(std::string& doc) {
  doc.clear();
  while (lines_->next(line_)) {
    if (is_blank(line_)) {
      if (!doc.empty()) return true;
      continue;
    }
    if (!doc.empty()) doc += '\n';
    doc += line_;
  }
  return !doc.empty();
}

std::vector<std::filesystem::path> expand_inputs(const std::vector<std::string>& patterns, const std::string& flag) {
  std::vector<std::filesystem::path> files;
  std::set<std::filesystem::path> seen;
  for (const auto& pattern : patterns) {
    std::vector<std::filesystem::path> matches;
    if (pattern.find_first_of("*?[") != std::string::npos) {
      glob_t g{};
      const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
      for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) matches.emplace_back(g.gl_pathv[i]);
      ::globfree(&g);
      if (matches.empty()) throw std::invalid_argument(flag + " " + pattern + ": the pattern matches no file");
    } else {
      matches.emplace_back(pattern);
    }
    for (auto& m : matches) {
      if (!std::filesystem::is_regular_file(m)) {
        throw std::invalid_argument(flag + " " + m.string() + ": not a regular file");
      }
      if (seen.insert(std::filesystem::weakly_canonical(m)).second) files.push_back(std::move(m));
    }
  }
  if (files.empty()) throw std::invalid_argument(flag + ": no input files given");
  return files;
}

}  // namespace linea::data
