// Readers of the JSONL files of lm-eval-harness's zero-shot tasks (the Hugging Face data sets its
// task YAMLs load, one record a line), building the prompts as its YAMLs and utils.py do:
//   arc_challenge, arc_easy (allenai/ai2_arc, test): question, choices.text, choices.label,
//       answerKey → "Question: {question}\nAnswer:" + " " + choice
//   hellaswag (Rowan/hellaswag, validation): activity_label, ctx_a, ctx_b, endings, label →
//       preprocess(activity_label + ": " + ctx_a + " " + capitalize(ctx_b)) + " " + preprocess(ending)
//   piqa (piqa, validation): goal, sol1, sol2, label → "Question: {goal}\nAnswer:" + " " + sol
//   winogrande (winogrande_xl, validation): sentence, option1, option2, answer ("1"/"2") →
//       sentence up to "_" with the option filled in, + " " + the rest of the sentence
//   openbookqa (allenai/openbookqa main, test): question_stem, choices.text, choices.label, answerKey
//   lambada_openai (EleutherAI/lambada_openai, test): text → all but the last word, " " + last word
// The file of task T is DATA_DIR/T.jsonl. A missing file or field, or a value of the wrong kind
// (a gold label outside the choices, a sentence without "_"), throws std::runtime_error naming
// the file, the line and the field.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "eval/choice_item.h"

namespace linea::eval {

// arc_challenge, arc_easy, hellaswag, piqa, winogrande, openbookqa.
const std::vector<std::string>& multiple_choice_task_names();
bool is_multiple_choice_task(std::string_view task);

std::filesystem::path task_file(const std::filesystem::path& data_dir, std::string_view task);

// At most `limit` items (0: all) of a multiple-choice task.
std::vector<ChoiceItem> read_multiple_choice_task(std::string_view task, const std::filesystem::path& data_dir,
                                                  int64_t limit = 0);
std::vector<LastWordItem> read_lambada(const std::filesystem::path& data_dir, int64_t limit = 0);

// HellaSwag's text clean-up (lm-eval's hellaswag/utils.py preprocess): strip, " [title]" → ". ",
// drop every "[...]", "  " → " ".
std::string hellaswag_preprocess(std::string text);

}  // namespace linea::eval
