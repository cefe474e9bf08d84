// Placement: where a run's model computes and in which dtype, the one rule that `linea train` and
// the commands that run a trained model (`linea generate`, `score`, `eval --device D`) share.
//   device: "auto" → cuda when this build has the CUDA backend and a device is visible, else cpu;
//     "cuda" without either is an error naming the setting ("run.toml: device = \"cuda\"",
//     "--device cuda");
//   compute dtype (train.precision): "auto" → bf16 on cuda, f32 on the cpu; "bf16"; "f32". The
//     master weights are f32 either way.
// Training reads both from the run config, and bf16 with a cpu device is an error there. Inference
// takes the device from its flag and, on cuda, the dtype the run trained in; on the cpu it computes
// in f32 whatever the run trained in (the CPU has no bf16 path; checkpoints hold the f32 masters).
#pragma once
#include <string>

#include "kernels/tensor.h"
#include "worker/run_config.h"

namespace linea {

struct Placement {
  Device device = Device::cpu;
  DType compute = DType::f32;  // activations and compute weights (masters are f32)
};

// The device `choice` (auto | cpu | cuda) names. `setting` says where the choice came from in an
// error; `instead` what to choose then ("use \"cpu\" or \"auto\"").
Device resolve_device(const std::string& choice, const std::string& setting, const std::string& instead);

// Why "auto" does not choose cuda here ("no CUDA device is visible", "this build of linea has no
// CUDA backend ..."); empty when it does.
std::string cuda_unavailable_reason();

// `linea train`: the config's device and train.precision (errors name c.source and the key).
Placement training_placement(const RunConfig& c);

// A trained run's model for inference on `device_choice` (the --device flag).
Placement inference_placement(const RunConfig& c, const std::string& device_choice);

}  // namespace linea
