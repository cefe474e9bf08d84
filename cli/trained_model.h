// A model trained by `linea train`, read back for inference (`linea score`, `generate`, `eval`,
// `export`). PATH is a run directory (the newest committed checkpoint under PATH/checkpoints/) or
// one committed checkpoint directory (PATH/checkpoints/step-N/); the checkpoint's manifest holds
// the resolved run config the model is built from, and its "model/<parameter>" tensors the (f32
// master) weights. The model goes onto the device of --device (auto | cpu | cuda) and computes in
// the dtype worker/placement.h gives it (on cuda the run's train.precision: bf16 for a run trained
// in bf16; f32 on the cpu). The tokenizer is the run's: data.tokenizer for a parquet stream, else
// the one the shard manifest of data.path names (the default corpus's for "default"); a
// --tokenizer SPEC (as `linea prepare --tokenizer`) replaces it. Errors name the path, or the flag,
// and what was expected.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/command_line.h"
#include "data/tokenizer.h"
#include "model/model.h"
#include "worker/placement.h"
#include "worker/run_config.h"

namespace linea::cli {

struct TrainedModel {
  RunConfig config;
  std::string device_choice;     // as --device gave it
  Placement placement;           // the model's device and compute dtype
  std::unique_ptr<Model> model;  // on placement.device
  std::filesystem::path checkpoint;
  int64_t step = 0;
};

// device_choice: auto | cpu | cuda; cuda without a CUDA build or device is an error naming --device.
TrainedModel load_trained_model(const std::filesystem::path& path, const std::string& device_choice = "cpu");

// The --device option of the commands that run a trained model: its usage line, and its value in
// `flags` (declared with option("device"); "auto" when absent, a UsageError for another word).
inline constexpr const char* kDeviceUsage =
    "  --device D         cuda, cpu or auto (default: cuda when linea has CUDA and a device is visible,\n"
    "                     else cpu); on cuda the run's train.precision (bf16 for a bf16 run), f32 on cpu\n";
std::string device_flag(const CommandLine& flags);

// "device cuda, dtype bf16 (the run's train.precision = \"auto\")", "device cpu, dtype f32
// (--device auto: no CUDA device is visible)": for the one line a command prints on stderr.
std::string describe_placement(const TrainedModel& trained);

// The run's tokenizer, or that of `spec` when it is not empty; its vocabulary must fit the model's.
std::unique_ptr<data::Tokenizer> load_run_tokenizer(const RunConfig& config, const std::string& spec,
                                                    int64_t model_vocab);

}  // namespace linea::cli
