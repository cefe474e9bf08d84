#include "data/parquet_documents.h"

#include <exception>
#include <stdexcept>

namespace linea::data {

struct ParquetDocuments::Decoded {
  DocumentLocation at;  // row 0 of the group
  StringColumn text;
  std::vector<int64_t> rows;  // kept rows, ascending
};

ParquetDocuments::ParquetDocuments(std::vector<std::filesystem::path> files, ParquetOptions options)
    : files_(std::move(files)), options_(std::move(options)) {
  if (options_.threads < 1) throw std::invalid_argument("parquet reader: threads must be ≥ 1");
}

ParquetDocuments::~ParquetDocuments() = default;

void ParquetDocuments::open_file(int64_t index) {
  file_.reset();
  file_index_ = index;
  next_group_ = 0;
  if (index < static_cast<int64_t>(files_.size())) {
    file_ = std::make_unique<ParquetFile>(files_[static_cast<size_t>(index)]);
    // Resolve the columns now, so that a file without them fails even when it has no rows.
    file_->string_column(options_.text_column);
    for (const auto& c : options_.filter.conditions()) file_->number_column(c.field);
  }
}

bool ParquetDocuments::fill() {
  for (;;) {
    if (!file_ || next_group_ == file_->num_row_groups()) {
      if (file_index_ + 1 >= static_cast<int64_t>(files_.size())) return false;
      open_file(file_index_ + 1);
      continue;
    }
    // The next row groups of this file, as many as threads and the byte budget allow.
    std::vector<std::unique_ptr<Decoded>> batch;
    int64_t bytes = 0;
    while (next_group_ < file_->num_row_groups() && static_cast<int>(batch.size()) < options_.threads &&
           (batch.empty() || bytes + file_->row_group_bytes(static_cast<int>(next_group_)) <= options_.batch_bytes)) {
      bytes += file_->row_group_bytes(static_cast<int>(next_group_));
      auto d = std::make_unique<Decoded>();
      d->at = {file_index_, next_group_, 0};
      batch.push_back(std::move(d));
      ++next_group_;
    }
    const int text = file_->string_column(options_.text_column);
    std::vector<int> numbers;
    for (const auto& c : options_.filter.conditions()) numbers.push_back(file_->number_column(c.field));
    std::vector<std::exception_ptr> errors(batch.size());
#pragma omp parallel for num_threads(options_.threads) schedule(dynamic, 1)
    for (size_t i = 0; i < batch.size(); ++i) {
      try {
        Decoded& d = *batch[i];
        const int group = static_cast<int>(d.at.row_group);
        file_->read_strings(group, text, d.text);
        std::vector<uint8_t> keep(d.text.size());
        for (size_t r = 0; r < keep.size(); ++r)
          keep[r] = d.text.valid[r] && d.text.ends[r] > (r ? d.text.ends[r - 1] : 0);
        NumberColumn values;
        for (size_t c = 0; c < numbers.size(); ++c) {
          file_->read_numbers(group, numbers[c], values);
          const RowCondition& condition = options_.filter.conditions()[c];
          for (size_t r = 0; r < keep.size(); ++r) keep[r] &= values.valid[r] && condition.holds(values.values[r]);
        }
        for (size_t r = 0; r < keep.size(); ++r) {
          if (keep[r]) d.rows.push_back(static_cast<int64_t>(r));
        }
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
    for (const auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    for (auto& d : batch) {
      if (!d->rows.empty()) ready_.push_back(std::move(d));
    }
    if (!ready_.empty()) return true;
  }
}

bool ParquetDocuments::next(std::string& doc, DocumentLocation& where) {
  while (ready_.empty() || ready_row_ == ready_.front()->rows.size()) {
    if (!ready_.empty()) {
      ready_.pop_front();
      ready_row_ = 0;
      continue;
    }
    if (!fill()) return false;
  }
  const Decoded& d = *ready_.front();
  const int64_t row = d.rows[ready_row_++];
  doc.assign(d.text.value(static_cast<size_t>(row)));
  where = {d.at.file, d.at.row_group, row};
  return true;
}

void ParquetDocuments::seek(const DocumentLocation& where) {
  ready_.clear();
  ready_row_ = 0;
  if (where.file < 0 || where.file > static_cast<int64_t>(files_.size())) {
    throw std::invalid_argument("parquet reader: file index " + std::to_string(where.file) + " of " +
                                std::to_string(files_.size()) + " files");
  }
  open_file(where.file);
  if (!file_) return;  // at the end
  if (where.row_group < 0 || where.row_group >= file_->num_row_groups() || where.row < 0 ||
      where.row > file_->row_group_rows(static_cast<int>(where.row_group))) {
    throw std::runtime_error("parquet " + file_->path().string() + ": no row " + std::to_string(where.row) +
                             " in row group " + std::to_string(where.row_group) + " (the file has " +
                             std::to_string(file_->num_row_groups()) + " row groups): was it changed?");
  }
  next_group_ = where.row_group;
  if (!fill()) return;
  // Skip the kept rows before `where` in its row group (fill() may have moved past an emptied one).
  const Decoded& d = *ready_.front();
  if (d.at.file == where.file && d.at.row_group == where.row_group) {
    while (ready_row_ < d.rows.size() && d.rows[ready_row_] < where.row) ++ready_row_;
  }
}

}  // namespace linea::data
