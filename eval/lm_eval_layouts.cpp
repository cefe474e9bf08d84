#include "eval/lm_eval_layouts.h"

#include <algorithm>
#include <stdexcept>

#include "eval/jsonl_records.h"

namespace linea::eval {
namespace {

ChoiceItem shared_context_item(const std::string& context, const std::vector<std::string>& choices, int64_t gold,
                               const JsonlRecord& record, const std::string& gold_field) {
  if (gold < 0 || gold >= int64_t(choices.size())) {
    record.fail(gold_field, "expected the index of one of the " + std::to_string(choices.size()) + " choices, got " +
                                std::to_string(gold));
  }
  ChoiceItem item;
  for (const std::string& choice : choices) {
    item.contexts.push_back(context);
    item.continuations.push_back(" " + choice);
    item.norm_bytes.push_back(double(std::max<size_t>(1, choice.size())));
  }
  item.gold = int(gold);
  return item;
}

// ARC and OpenBookQA: the gold is answerKey's position among choices.label.
int64_t labelled_gold(const JsonlRecord& record) {
  const std::vector<std::string> labels = record.nested_strings("choices", "label");
  std::string key = record.string("answerKey");
  key.erase(0, key.find_first_not_of(' '));
  const auto it = std::find(labels.begin(), labels.end(), key);
  if (it == labels.end()) record.fail("answerKey", "\"" + key + "\" is not one of choices.label");
  return it - labels.begin();
}

std::vector<std::string> labelled_choices(const JsonlRecord& record) {
  const std::vector<std::string> texts = record.nested_strings("choices", "text");
  if (texts.size() != record.nested_strings("choices", "label").size()) {
    record.fail("choices", "expected as many labels as texts");
  }
  return texts;
}

std::string strip(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\n\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\n\r") + 1 - first);
}

// Python's str.capitalize on ASCII: the first character upper case, the rest lower case.
std::string capitalize(std::string s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 128) s[i] = char(i == 0 ? std::toupper(c) : std::tolower(c));
  }
  return s;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

ChoiceItem read_item(std::string_view task, const JsonlRecord& r) {
  if (task == "arc_challenge" || task == "arc_easy") {
    return shared_context_item("Question: " + r.string("question") + "\nAnswer:", labelled_choices(r), labelled_gold(r),
                               r, "answerKey");
  }
  if (task == "openbookqa")
    return shared_context_item(r.string("question_stem"), labelled_choices(r), labelled_gold(r), r, "answerKey");
  if (task == "piqa") {
    return shared_context_item("Question: " + r.string("goal") + "\nAnswer:", {r.string("sol1"), r.string("sol2")},
                               r.integer("label"), r, "label");
  }
  if (task == "hellaswag") {
    const std::string context = hellaswag_preprocess(r.string("activity_label") + ": " + r.string("ctx_a") + " " +
                                                     capitalize(r.string("ctx_b")));
    std::vector<std::string> endings = r.strings("endings");
    for (std::string& e : endings) e = hellaswag_preprocess(e);
    return shared_context_item(context, endings, r.integer("label"), r, "label");
  }
  if (task == "winogrande") {
    const std::string sentence = r.string("sentence");
    const size_t blank = sentence.find('_');
    if (blank == std::string::npos) r.fail("sentence", "expected a \"_\" where the option goes");
    const int64_t answer = r.integer("answer");
    if (answer != 1 && answer != 2) r.fail("answer", "expected \"1\" or \"2\", got " + r.field("answer").dump());
    ChoiceItem item;
    const std::string rest = " " + strip(sentence.substr(blank + 1));
    for (const std::string& option : {r.string("option1"), r.string("option2")}) {
      item.contexts.push_back(sentence.substr(0, blank) + option);
      item.continuations.push_back(rest);
      item.norm_bytes.push_back(double(std::max<size_t>(1, item.contexts.back().size())));
    }
    item.gold = int(answer - 1);
    return item;
  }
  throw std::invalid_argument("not a multiple-choice task: " + std::string(task));
}

}  // namespace

const std::vector<std::string>& multiple_choice_task_names() {
  static const std::vector<std::string> names = {"arc_challenge", "arc_easy",   "hellaswag",
                                                 "piqa",          "winogrande", "openbookqa"};
  return names;
}

bool is_multiple_choice_task(std::string_view task) {
  const auto& names = multiple_choice_task_names();
  return std::find(names.begin(), names.end(), task) != names.end();
}

std::filesystem::path task_file(const std::filesystem::path& data_dir, std::string_view task) {
  return data_dir / (std::string(task) + ".jsonl");
}

std::vector<ChoiceItem> read_multiple_choice_task(std::string_view task, const std::filesystem::path& data_dir,
                                                  int64_t limit) {
  std::vector<ChoiceItem> items;
  for (const JsonlRecord& record : read_jsonl(task_file(data_dir, task), limit))
    items.push_back(read_item(task, record));
  return items;
}

std::vector<LastWordItem> read_lambada(const std::filesystem::path& data_dir, int64_t limit) {
  std::vector<LastWordItem> items;
  for (const JsonlRecord& record : read_jsonl(task_file(data_dir, "lambada_openai"), limit)) {
    const std::string text = record.string("text");
    const size_t space = text.rfind(' ');
    if (space == std::string::npos || space == 0 || space + 1 == text.size()) {
      record.fail("text", "expected a passage of several words (the last one is the target)");
    }
    items.push_back({text.substr(0, space), text.substr(space)});
  }
  return items;
}

std::string hellaswag_preprocess(std::string text) {
  text = strip(text);
  text = replace_all(text, " [title]", ". ");
  for (size_t open = text.find('['); open != std::string::npos; open = text.find('[', open)) {
    const size_t close = text.find(']', open);
    if (close == std::string::npos) break;
    text.erase(open, close + 1 - open);
  }
  // Python's str.replace: one left-to-right pass over non-overlapping occurrences.
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == ' ' && i + 1 < text.size() && text[i + 1] == ' ') ++i;
  }
  return out;
}

}  // namespace linea::eval
