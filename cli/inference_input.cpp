#include "cli/inference_input.h"

#include <fstream>
#include <iostream>
#include <stdexcept>

namespace linea::cli {

std::vector<InputLine> read_input_lines(const std::string& path) {
  const bool from_stdin = path.empty() || path == "-";
  std::ifstream file;
  if (!from_stdin) {
    file.open(path);
    if (!file) throw std::invalid_argument(path + ": cannot be opened for reading");
  }
  std::istream& in = from_stdin ? std::cin : file;
  const std::string name = from_stdin ? "<stdin>" : path;
  std::vector<InputLine> lines;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    lines.push_back({name + ":" + std::to_string(number), line});
  }
  return lines;
}

data::Tokenizer& RequestText::tokenizer() {
  if (!tokenizer_) tokenizer_ = load_run_tokenizer(trained_.config, spec_, trained_.config.model.vocab);
  return *tokenizer_;
}

inference::TokenIds RequestText::tokens(const nlohmann::json& line, const std::string& key, const InputLine& where) {
  const std::string ids_key = key + "_ids";
  if (line.contains(ids_key)) {
    if (!line[ids_key].is_array())
      throw std::invalid_argument(where.where + ": " + ids_key + " must be an array of ids");
    inference::TokenIds ids;
    for (const auto& id : line[ids_key]) {
      if (!id.is_number_integer()) throw std::invalid_argument(where.where + ": " + ids_key + " holds a non-integer");
      ids.push_back(id.get<int32_t>());
    }
    return ids;
  }
  if (!line.contains(key) || !line[key].is_string()) {
    throw std::invalid_argument(where.where + ": expected a string \"" + key + "\" or an array \"" + ids_key + "\"");
  }
  return tokenizer().encode(line[key].get<std::string>());
}

}  // namespace linea::cli
