// worker/placement.h, the rule `linea train` and the inference commands share: the cpu computes in
// f32 whatever precision the run trained in; auto takes the CPU where no CUDA device is visible;
// cuda there is an error naming the setting it came from (the config key, or --device); on a CUDA
// device the inference dtype is the run's train.precision (checked where there is a device).
#include <gtest/gtest.h>

#include <string>

#include "kernels/device_memory.h"
#include "tests/testing/kernel_test.h"
#include "tests/testing/tiny_model.h"
#include "worker/placement.h"
#include "worker/run_config.h"

namespace linea {
namespace {

RunConfig config(const std::string& device, const std::string& precision) {
  return parse_run_config(testing::tiny_hybrid_model(64), "run.toml",
                          {"device=" + device, "train.precision=" + precision});
}

TEST(Placement, InferenceOnTheCpuIsF32WhateverTheRunTrainedIn) {
  for (const std::string precision : {"auto", "bf16", "f32"}) {
    const Placement p = inference_placement(config("cuda", precision), "cpu");
    EXPECT_EQ(p.device, Device::cpu) << precision;
    EXPECT_EQ(p.compute, DType::f32) << precision;
  }
}

TEST(Placement, AutoTakesCudaOnlyWhereADeviceIsVisible) {
  const Placement p = inference_placement(config("cuda", "bf16"), "auto");
  EXPECT_EQ(p.device, cuda_device_available() ? Device::cuda : Device::cpu);
  EXPECT_EQ(cuda_unavailable_reason().empty(), cuda_device_available());
  if (!cuda_device_available()) {
    EXPECT_EQ(p.compute, DType::f32);
    EXPECT_EQ(training_placement(config("auto", "auto")).device, Device::cpu);
  }
}

TEST(Placement, CudaWithoutADeviceIsAnErrorNamingTheSetting) {
  if (cuda_device_available()) GTEST_SKIP() << "a CUDA device is visible";
  const std::string why = cuda_unavailable_reason();
  EXPECT_TRUE(testing::throws_invalid_argument([] { inference_placement(config("cpu", "f32"), "cuda"); },
                                               {"--device cuda, but " + why, "use --device cpu or auto"}));
  EXPECT_TRUE(testing::throws_invalid_argument([] { training_placement(config("cuda", "auto")); },
                                               {"run.toml: device = \"cuda\", but " + why, "use \"cpu\" or \"auto\""}));
  EXPECT_TRUE(testing::throws_invalid_argument([] { training_placement(config("auto", "bf16")); },
                                               {"train.precision = \"bf16\" needs a CUDA device"}));
}

TEST(Placement, InferenceOnCudaTakesTheRunsPrecision) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
  EXPECT_EQ(inference_placement(config("auto", "auto"), "cuda").compute, DType::bf16);
  EXPECT_EQ(inference_placement(config("cuda", "bf16"), "cuda").compute, DType::bf16);
  EXPECT_EQ(inference_placement(config("cpu", "f32"), "cuda").compute, DType::f32);
  EXPECT_EQ(inference_placement(config("cpu", "f32"), "auto").device, Device::cuda);
}

}  // namespace
}  // namespace linea
