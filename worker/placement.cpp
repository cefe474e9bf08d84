#include "worker/placement.h"

#include <stdexcept>

#include "kernels/device_memory.h"

namespace linea {

namespace {

// train.precision on `device`: auto is bf16 on cuda, f32 on the cpu.
DType precision_dtype(const std::string& precision, Device device) {
  if (precision == "bf16") return DType::bf16;
  if (precision == "f32") return DType::f32;
  return device == Device::cuda ? DType::bf16 : DType::f32;
}

}  // namespace

std::string cuda_unavailable_reason() {
  if (!cuda_backend_built()) return "this build of linea has no CUDA backend (configure with LINEA_CUDA=ON)";
  return cuda_device_available() ? "" : "no CUDA device is visible";
}

Device resolve_device(const std::string& choice, const std::string& setting, const std::string& instead) {
  const std::string unavailable = cuda_unavailable_reason();
  if (choice == "cuda" && !unavailable.empty())
    throw std::invalid_argument(setting + ", but " + unavailable + "; " + instead);
  return choice == "cuda" || (choice == "auto" && unavailable.empty()) ? Device::cuda : Device::cpu;
}

Placement training_placement(const RunConfig& c) {
  Placement p;
  p.device = resolve_device(c.device, c.source + ": device = \"" + c.device + "\"", "use \"cpu\" or \"auto\"");
  if (c.train.precision == "bf16" && p.device == Device::cpu) {
    throw std::invalid_argument(c.source + ": train.precision = \"bf16\" needs a CUDA device; device = \"" + c.device +
                                "\" trains on the cpu, in \"f32\"");
  }
  p.compute = precision_dtype(c.train.precision, p.device);
  return p;
}

Placement inference_placement(const RunConfig& c, const std::string& device_choice) {
  Placement p;
  p.device = resolve_device(device_choice, "--device " + device_choice, "use --device cpu or auto");
  p.compute = p.device == Device::cpu ? DType::f32 : precision_dtype(c.train.precision, p.device);
  return p;
}

}  // namespace linea
