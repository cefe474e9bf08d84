// The input of `linea score` and `linea generate`: lines of a file, or of stdin for "-" or no
// file (blank lines skipped, each with "FILE:LINE" for messages), and the token ids a JSON line
// gives under a key: KEY_ids (an array of ids) or KEY (a text, encoded with the run's tokenizer,
// loaded on first use).
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/trained_model.h"
#include "inference/language_model.h"

namespace linea::cli {

struct InputLine {
  std::string where;  // "FILE:LINE"
  std::string text;
};

std::vector<InputLine> read_input_lines(const std::string& path);

class RequestText {
 public:
  // tokenizer_spec: --tokenizer's value (empty: the run's tokenizer).
  RequestText(const TrainedModel& trained, std::string tokenizer_spec)
      : trained_(trained), spec_(std::move(tokenizer_spec)) {}

  bool has(const nlohmann::json& line, const std::string& key) const {
    return line.contains(key) || line.contains(key + "_ids");
  }
  // Throws std::invalid_argument naming the line and key when neither form is there.
  inference::TokenIds tokens(const nlohmann::json& line, const std::string& key, const InputLine& where);
  data::Tokenizer& tokenizer();

 private:
  const TrainedModel& trained_;
  std::string spec_;
  std::unique_ptr<data::Tokenizer> tokenizer_;
};

}  // namespace linea::cli
