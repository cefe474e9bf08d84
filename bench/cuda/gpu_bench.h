// gpu_bench: what every GPU benchmark shares. Times are CUDA-event milliseconds on the default
// stream (mean over the timed launches, after untimed warm-up launches); results are JSON lines on
// stdout, one per measurement; inputs are filled on the host from a seeded Rng and copied over.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "kernels/random.h"
#include "kernels/tensor.h"

namespace linea::bench {

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// Mean milliseconds of fn over `iterations` launches, after 3 untimed ones, between two events.
inline double mean_ms(int iterations, const std::function<void()>& fn) {
  for (int i = 0; i < 3; ++i) fn();
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaEventRecord(start), "cudaEventRecord");
  for (int i = 0; i < iterations; ++i) fn();
  check(cudaEventRecord(stop), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / iterations;
}

// A device tensor (f32 or bf16) with entries uniform in [lo, hi).
inline Tensor random_device(const Shape& shape, DType dtype, Rng& rng, double lo = -1, double hi = 1) {
  Tensor host = Tensor::empty(shape, dtype);
  for (int64_t i = 0; i < host.numel(); ++i) {
    const float v = static_cast<float>(lo + (hi - lo) * rng.uniform());
    if (dtype == DType::bf16) {
      host.data<bf16>()[i] = bf16(v);
    } else {
      host.data<float>()[i] = v;
    }
  }
  Tensor device = Tensor::empty(shape, dtype, Device::cuda);
  device.copy_from(host);
  return device;
}

// i32 ids uniform in [0, range), on the device.
inline Tensor device_ids(int64_t n, int64_t range, Rng& rng) {
  Tensor host = Tensor::empty({n}, DType::i32);
  for (int64_t i = 0; i < n; ++i) host.data<int32_t>()[i] = static_cast<int32_t>(rng.next_u64() % range);
  Tensor device = Tensor::empty({n}, DType::i32, Device::cuda);
  device.copy_from(host);
  return device;
}

// argv[index] as a positive integer, or `fallback` when absent; `program` names the benchmark in errors.
inline int64_t positive_arg(const char* program, int argc, char** argv, int index, int64_t fallback) {
  if (argc <= index) return fallback;
  try {
    const int64_t v = std::stoll(argv[index]);
    if (v <= 0) throw std::invalid_argument("not positive");
    return v;
  } catch (const std::exception&) {
    throw std::invalid_argument(std::string(program) + ": argument " + std::to_string(index) + " ('" + argv[index] +
                                "'): expected a positive integer");
  }
}

inline void emit(const nlohmann::json& line) {
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
}

// The device's name and multiprocessor count, as the first line of a benchmark's output.
inline void emit_device() {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  emit({{"device", prop.name}, {"multiprocessors", prop.multiProcessorCount}});
}

inline double tflops(double flop, double ms) { return flop / (ms * 1e9); }
inline double gbs(double bytes, double ms) { return bytes / (ms * 1e6); }

}  // namespace linea::bench
