// The QA sets RULER's qa_1 and qa_2 draw from, which users supply (not shipped: licences, size):
//   qa_1: DATA_DIR/squad.json, SQuAD 2.0's dev set (dev-v2.0.json): data[].paragraphs[] with
//         "context" and "qas"[] of "question", "answers"[].text and "is_impossible" (those skipped);
//   qa_2: DATA_DIR/hotpotqa.json, HotpotQA's dev distractor set (hotpot_dev_distractor_v1.json): a
//         list of {"question", "answer", "context": [[title, [sentence, ...]], ...]}; a paragraph is
//         "title\nsentences joined", every paragraph of the context a gold document (as RULER).
// Every distinct paragraph is a document; a question's gold documents are indices into them.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace linea::eval {

struct QaExample {
  std::string question;
  std::vector<std::string> answers;
  std::vector<int64_t> gold_documents;
};

struct QaSet {
  std::vector<std::string> documents;
  std::vector<QaExample> examples;
};

std::filesystem::path qa_file(const std::filesystem::path& data_dir, std::string_view task);

// Throws std::runtime_error naming the file (and the field, with the example's position) when the
// file is missing or does not hold that layout.
QaSet read_qa_set(std::string_view task, const std::filesystem::path& data_dir);

}  // namespace linea::eval
