// The problems of gpu/test_gpu_model.cpp (tests/testing/model_step_problem.h) are well-conditioned
// enough for its limits, checked on the CPU: in f64, the gradients of its two-micro-batch step on
// the masters rounded to bf16 stay within err_ratio 0.1 of those on the masters themselves, and an
// f32 step's within 2e-5, for every mixer. A bf16 step on the GPU rounds the weights so and its
// activations besides: on an H200 (2026-12-03) its worst err_ratio was 0.76× (RetNet) to 2.3×
// (Mamba-2) this test's figure, under a limit of 0.2; a problem far above 0.1 here fails there
// whatever the GPU computes (RWKV-6's former masters: 2.1 here, about 1 on the H200).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "kernels/ops.h"
#include "model/model.h"
#include "tests/testing/kernel_test.h"
#include "tests/testing/model_step_problem.h"

namespace linea {
namespace {

// The gradients (f64, [numel]) of the step on `masters` in a model of `dtype` (f32 or f64).
Tensor step_gradients(const ModelConfig& config, DType dtype, const Tensor& masters) {
  Model model(config, dtype);
  ops::convert(model.params().values(), masters);
  model.params().zero_grads();
  for (const testing::PackedBatch& b : testing::model_step_batches(config.vocab)) {
    model.forward_backward(b.ids, b.targets, b.seqs, 0.5);
  }
  Tensor grads = Tensor::empty({model.params().numel()}, DType::f64);
  ops::convert(grads, model.params().grads());
  return grads;
}

// The worst err_ratio of a parameter's gradient in `got` against `ref`, and that parameter's name.
std::pair<double, std::string> worst_err_ratio(const ParameterSet& params, const Tensor& ref, const Tensor& got) {
  std::pair<double, std::string> worst{0.0, ""};
  for (const Parameter& p : params.params()) {
    const Tensor a = Tensor::view(ref.data<double>() + p.offset, p.shape, DType::f64);
    const Tensor b = Tensor::view(got.data<double>() + p.offset, p.shape, DType::f64);
    worst = std::max(worst, {testing::compare(a, b).err_ratio, p.name});
  }
  return worst;
}

class ModelStepConditioning : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelStepConditioning, RoundingTheMastersLeavesTheGpuTestRoom) {
  const ModelConfig config = testing::model_step_hybrid(GetParam());
  Model reference(config, DType::f64);
  const Tensor masters = testing::draw_model_step_masters(reference);
  Tensor rounded = Tensor::empty(masters.shape(), DType::bf16);
  ops::convert(rounded, masters);
  const Tensor ref = step_gradients(config, DType::f64, masters);
  const auto bf16 = worst_err_ratio(reference.params(), ref, step_gradients(config, DType::f64, rounded));
  const auto f32 = worst_err_ratio(reference.params(), ref, step_gradients(config, DType::f32, masters));
  std::printf("%s: bf16-rounded masters err_ratio %.3g (%s), f32 step %.3g (%s)\n", GetParam().c_str(), bf16.first,
              bf16.second.c_str(), f32.first, f32.second.c_str());
  EXPECT_LE(bf16.first, 0.1) << bf16.second;
  EXPECT_LE(f32.first, 2e-5) << f32.second;
}

INSTANTIATE_TEST_SUITE_P(Mixers, ModelStepConditioning,
                         ::testing::Values("deltanet", "gdn", "kda", "gdn2", "gla", "retnet", "hgrn", "hgrn2", "mamba2",
                                           "rwkv6"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace linea
