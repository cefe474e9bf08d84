#include "cli/trained_model.h"

#include <stdexcept>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "data/dataset.h"
#include "data/default_corpus.h"
#include "data/prepare.h"

namespace linea::cli {

namespace fs = std::filesystem;

namespace {

// The checkpoint directory PATH names: itself when it is one, else the newest under PATH/checkpoints.
fs::path checkpoint_directory(const fs::path& path) {
  if (!fs::is_directory(path)) throw std::invalid_argument(path.string() + ": not a run or checkpoint directory");
  if (fs::exists(path / "COMMITTED")) return path;
  const fs::path root = path / "checkpoints";
  const std::vector<CommittedCheckpoint> committed = list_committed_checkpoints(root);
  if (committed.empty()) {
    throw std::invalid_argument(path.string() + ": no committed checkpoint (expected " + root.string() +
                                "/step-N/ with a COMMITTED marker, or a checkpoint directory itself)");
  }
  return committed.back().directory;
}

// The model's parameters from the checkpoint's "model/<name>" tensors, into Parameter::value.
void read_parameters(CheckpointReader& reader, TrainedModel& trained) {
  for (Parameter& p : trained.model->params().params()) {
    const std::string name = "model/" + p.name;
    if (!reader.contains(name)) {
      throw std::runtime_error(trained.checkpoint.string() + ": the checkpoint lacks tensor " + name);
    }
    if (reader.full_shape(name) != p.shape || reader.dtype(name) != p.value.dtype()) {
      throw std::runtime_error(trained.checkpoint.string() + ": tensor " + name + " is " +
                               std::string(dtype_name(reader.dtype(name))) + shape_string(reader.full_shape(name)) +
                               ", the model's parameter is " + p.value.describe());
    }
    reader.read(name, std::vector<int64_t>(p.shape.size(), 0), p.value);
  }
}

}  // namespace

TrainedModel load_trained_model(const fs::path& path, const std::string& device_choice) {
  TrainedModel trained;
  trained.checkpoint = checkpoint_directory(path);
  CheckpointReader reader(trained.checkpoint);
  trained.step = reader.info().step;
  trained.config = parse_run_config(reader.info().config, (trained.checkpoint / "manifest.json").string(), {});
  trained.device_choice = device_choice;
  trained.placement = inference_placement(trained.config, device_choice);
  trained.model = std::make_unique<Model>(trained.config.model, DType::f32, true, TensorParallel{},
                                          trained.placement.device, trained.placement.compute);
  // Read on the host; on cuda then copied to the device and rounded into the compute weights.
  trained.model->params().with_host_values([&] { read_parameters(reader, trained); });
  return trained;
}

std::string device_flag(const CommandLine& flags) { return flags.choice("device", "auto", {"auto", "cpu", "cuda"}); }

std::string describe_placement(const TrainedModel& trained) {
  std::string text = "device " + std::string(device_name(trained.placement.device)) + ", dtype " +
                     std::string(dtype_name(trained.placement.compute));
  if (trained.placement.device == Device::cuda) {
    text += " (the run's train.precision = \"" + trained.config.train.precision + "\")";
  } else if (trained.device_choice == "auto") {
    text += " (--device auto: " + cuda_unavailable_reason() + ")";
  }
  return text;
}

std::unique_ptr<data::Tokenizer> load_run_tokenizer(const RunConfig& config, const std::string& spec,
                                                    int64_t model_vocab) {
  std::unique_ptr<data::Tokenizer> tokenizer;
  if (!spec.empty()) {
    tokenizer = data::TokenizerChoice::parse(spec, "--tokenizer").load();
  } else if (!config.data.parquet_glob().empty()) {
    tokenizer = data::TokenizerChoice::parse(config.data.tokenizer, "data.tokenizer").load();
  } else {
    const fs::path dir = config.data.path == "default" ? data::default_corpus_dir() : fs::path(config.data.path);
    if (!fs::exists(dir / "manifest.json")) {
      throw std::invalid_argument(dir.string() +
                                  ": no manifest.json naming the run's tokenizer; give --tokenizer SPEC");
    }
    tokenizer = data::Dataset::open(dir, {.verify_checksums = false})->tokenizer();
  }
  if (tokenizer->vocab_size() > model_vocab) {
    throw std::invalid_argument("the tokenizer's vocabulary (" + std::to_string(tokenizer->vocab_size()) +
                                ") is larger than the model's (model.vocab = " + std::to_string(model_vocab) + ")");
  }
  return tokenizer;
}

}  // namespace linea::cli
