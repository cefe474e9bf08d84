// `linea logits MODEL --input TOKENS.json --out LOGITS.safetensors [--config CONFIG.toml]`: the
// logits of one full forward over given token sequences, every position, written as safetensors:
// what scripts/compare-fla-logits.py compares with fla's own model classes. MODEL is a trained
// model (cli/trained_model.h) or hf:DIR, an fla / Hugging Face checkpoint read into the model of
// CONFIG's [model] table (inference/hf_checkpoint.h), both on the CPU in f32.
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "cli/command.h"
#include "cli/command_line.h"
#include "cli/trained_model.h"
#include "data/config_reader.h"
#include "inference/hf_checkpoint.h"

namespace linea::cli {
namespace {

constexpr const char* kUsage =
    "usage: linea logits MODEL --input TOKENS.json --out LOGITS.safetensors [--config CONFIG.toml]\n"
    "\n"
    "Runs one full forward (on the CPU, in f32) over each token sequence of TOKENS.json, a JSON object\n"
    "  {\"input_ids\": [[ID, ...], ...]}   (S sequences of T ids each; every sequence one document)\n"
    "and writes LOGITS.safetensors with \"logits\" (F32 [S, T, vocab]: at [s, t] the logits after token\n"
    "t of sequence s, i.e. of the next token) and \"input_ids\" (I64 [S, T]).\n"
    "MODEL: a run directory (its newest committed checkpoint), one checkpoint directory (step-N/), or\n"
    "hf:DIR, an fla / Hugging Face checkpoint (config.json + model.safetensors, as `linea export`\n"
    "writes and fla's save_pretrained) read into the model of CONFIG.toml's [model] table (--config,\n"
    "required then; its other tables are ignored), as `[model] init_from = \"hf:DIR\"` reads it.\n";

// The S × T ids of TOKENS.json, row by row.
std::vector<std::vector<int32_t>> read_tokens(const std::string& path, int64_t vocab) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot be opened");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  const std::string expected = ": expected {\"input_ids\": [[ID, ...], ...]}, S ≥ 1 sequences of T ≥ 1 ids each";
  if (!j.is_object() || !j.contains("input_ids") || !j["input_ids"].is_array() || j["input_ids"].empty()) {
    throw std::invalid_argument(path + expected);
  }
  std::vector<std::vector<int32_t>> rows;
  for (const nlohmann::json& row : j["input_ids"]) {
    if (!row.is_array() || row.empty() || (!rows.empty() && row.size() != rows.front().size())) {
      throw std::invalid_argument(path + ": input_ids[" + std::to_string(rows.size()) + "]" + expected +
                                  " (T equal in every sequence)");
    }
    std::vector<int32_t>& ids = rows.emplace_back();
    for (const nlohmann::json& id : row) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab) {
        throw std::invalid_argument(path + ": input_ids[" + std::to_string(rows.size() - 1) +
                                    "]: expected token ids in [0, " + std::to_string(vocab) + "), got " + id.dump());
      }
      ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  return rows;
}

std::unique_ptr<Model> load_model(const std::string& spec, const std::string& config_path) {
  if (spec.rfind("hf:", 0) != 0) {
    if (!config_path.empty()) throw std::invalid_argument("--config: only for an hf:DIR model");
    return load_trained_model(spec).model;
  }
  if (config_path.empty()) throw std::invalid_argument(spec + ": an hf:DIR model needs --config CONFIG.toml");
  ConfigReader reader = ConfigReader::from_file(config_path);
  const ModelConfig config = ModelConfig::parse(reader.section("model"));
  reader.check_unknown_keys({"model"});
  auto model = std::make_unique<Model>(config);
  inference::import_hf(*model, spec.substr(3));
  return model;
}

int run_logits(int argc, char** argv) {
  CommandLine flags("logits", kUsage);
  if (const auto done = flags.option({"input", "out", "config"}).positional(1, 1).parse(argc, argv)) return *done;
  flags.require({"input", "out"});
  const std::string input = flags.string("input", ""), out = flags.string("out", "");
  std::unique_ptr<Model> model = load_model(flags.positional()[0], flags.string("config", ""));
  const int64_t vocab = model->config().vocab;
  const std::vector<std::vector<int32_t>> rows = read_tokens(input, vocab);
  const int64_t S = static_cast<int64_t>(rows.size()), T = static_cast<int64_t>(rows.front().size());

  Tensor ids = Tensor::empty({S * T}, DType::i32), input_ids = Tensor::empty({S, T}, DType::i64);
  for (int64_t s = 0; s < S; ++s) {
    for (int64_t t = 0; t < T; ++t) {
      ids.data<int32_t>()[s * T + t] = rows[s][t];
      input_ids.data<int64_t>()[s * T + t] = rows[s][t];
    }
  }
  std::vector<int64_t> every_row(S * T);
  for (int64_t i = 0; i < S * T; ++i) every_row[i] = i;
  const Tensor logits = model->logits(ids, SeqLayout::uniform(S, T), every_row);
  write_safetensors(out, {{"logits", logits.reshape({S, T, vocab})}, {"input_ids", input_ids}}, {{"format", "pt"}});
  std::printf("wrote the logits of %lld sequences of %lld tokens (vocab %lld) to %s\n", static_cast<long long>(S),
              static_cast<long long>(T), static_cast<long long>(vocab), out.c_str());
  return 0;
}

const CommandRegistration registration({"logits", "the logits of token sequences, for comparing with fla", run_logits});

}  // namespace
}  // namespace linea::cli
