#include "eval/ruler_qa_documents.h"

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace linea::eval {
namespace {

using nlohmann::json;

struct Reader {
  std::string file;
  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw std::runtime_error(file + ": " + where + ": " + what);
  }
  const json& at(const json& j, const std::string& key, const std::string& where) const {
    if (!j.is_object() || !j.contains(key)) fail(where, "missing field \"" + key + "\"");
    return j[key];
  }
  std::string string(const json& j, const std::string& key, const std::string& where) const {
    const json& v = at(j, key, where);
    if (!v.is_string()) fail(where + "." + key, "expected a string");
    return v.get<std::string>();
  }
  const json& array(const json& j, const std::string& key, const std::string& where) const {
    const json& v = at(j, key, where);
    if (!v.is_array()) fail(where + "." + key, "expected an array");
    return v;
  }
};

int64_t document_index(QaSet& set, std::map<std::string, int64_t>& index, const std::string& text) {
  const auto [it, added] = index.emplace(text, int64_t(set.documents.size()));
  if (added) set.documents.push_back(text);
  return it->second;
}

void read_squad(const json& root, const Reader& r, QaSet& set) {
  std::map<std::string, int64_t> index;
  const json& articles = r.array(root, "data", "top level");
  for (size_t a = 0; a < articles.size(); ++a) {
    const std::string aw = "data[" + std::to_string(a) + "]";
    const json& paragraphs = r.array(articles[a], "paragraphs", aw);
    for (size_t p = 0; p < paragraphs.size(); ++p) {
      const std::string pw = aw + ".paragraphs[" + std::to_string(p) + "]";
      const int64_t doc = document_index(set, index, r.string(paragraphs[p], "context", pw));
      const json& qas = r.array(paragraphs[p], "qas", pw);
      for (size_t q = 0; q < qas.size(); ++q) {
        const std::string qw = pw + ".qas[" + std::to_string(q) + "]";
        if (qas[q].value("is_impossible", false)) continue;
        QaExample ex{r.string(qas[q], "question", qw), {}, {doc}};
        for (const json& answer : r.array(qas[q], "answers", qw))
          ex.answers.push_back(r.string(answer, "text", qw + ".answers"));
        if (!ex.answers.empty()) set.examples.push_back(std::move(ex));
      }
    }
  }
}

void read_hotpot(const json& root, const Reader& r, QaSet& set) {
  std::map<std::string, int64_t> index;
  if (!root.is_array()) r.fail("top level", "expected an array of questions");
  for (size_t i = 0; i < root.size(); ++i) {
    const std::string w = "[" + std::to_string(i) + "]";
    QaExample ex{r.string(root[i], "question", w), {r.string(root[i], "answer", w)}, {}};
    for (const json& paragraph : r.array(root[i], "context", w)) {
      if (!paragraph.is_array() || paragraph.size() != 2 || !paragraph[0].is_string() || !paragraph[1].is_array()) {
        r.fail(w + ".context", "expected [title, [sentence, ...]] pairs");
      }
      std::string text = paragraph[0].get<std::string>() + "\n";
      for (const json& sentence : paragraph[1]) {
        if (!sentence.is_string()) r.fail(w + ".context", "expected sentences as strings");
        text += sentence.get<std::string>();
      }
      ex.gold_documents.push_back(document_index(set, index, text));
    }
    set.examples.push_back(std::move(ex));
  }
}

}  // namespace

std::filesystem::path qa_file(const std::filesystem::path& data_dir, std::string_view task) {
  return data_dir / (task == "qa_1" ? "squad.json" : "hotpotqa.json");
}

QaSet read_qa_set(std::string_view task, const std::filesystem::path& data_dir) {
  const std::filesystem::path path = qa_file(data_dir, task);
  const Reader r{path.string()};
  std::ifstream in(path);
  if (!in) {
    throw std::runtime_error(
        path.string() + ": cannot open: " + std::string(task) + " needs " +
        (task == "qa_1" ? "SQuAD 2.0's dev-v2.0.json" : "HotpotQA's hotpot_dev_distractor_v1.json") +
        " there (--data-dir; README \"Evaluation\"); qa_synthetic needs no file");
  }
  const json root = json::parse(in, nullptr, false);
  if (root.is_discarded()) r.fail("top level", "not valid JSON");
  QaSet set;
  if (task == "qa_1") {
    read_squad(root, r, set);
  } else {
    read_hotpot(root, r, set);
  }
  if (set.examples.empty()) r.fail("top level", "no answerable question");
  return set;
}

}  // namespace linea::eval
