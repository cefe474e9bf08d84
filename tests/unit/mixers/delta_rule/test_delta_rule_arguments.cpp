// delta_rule_forward / delta_rule_backward reject bad arguments with std::invalid_argument naming
// the op and the argument, before writing anything.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "tests/testing/mixers/delta_rule_problem.h"

namespace linea {
namespace {

using ops::DecayKind;
using ops::DeltaRuleImpl;
using ops::GateKind;
using testing::DeltaRuleProblem;
using testing::zeros_like;

const testing::DeltaRuleShape kShape{{0, 3, 7}, 2, 4, 5, true};

// Runs `call` and expects std::invalid_argument whose message contains every part of `expected`.
void expect_rejected(const std::function<void()>& call, std::initializer_list<const char*> expected) {
  try {
    call();
    ADD_FAILURE() << "no exception; expected one mentioning " << *expected.begin();
  } catch (const std::invalid_argument& e) {
    for (const char* part : expected) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

void forward(const DeltaRuleProblem& p, Tensor o, Tensor ht) {
  ops::delta_rule_forward(DeltaRuleImpl::chunked, p.spec, p.seqs, p.in, o, ht);
}

TEST(DeltaRuleArguments, ForwardRejectsBadInputsAndLeavesOutputsUntouched) {
  const DeltaRuleProblem good = testing::make_delta_rule_problem(DecayKind::scalar, GateKind::beta, kShape, 1, 5);
  Tensor o = Tensor::empty({7, 2, 5}, DType::f64);
  fill_constant(o, 7);
  const Tensor ht = Tensor::empty({2, 2, 4, 5}, DType::f64);

  DeltaRuleProblem p = good;
  p.in.k = Tensor::zeros({7, 2, 3}, DType::f64);
  expect_rejected([&] { forward(p, o, ht); }, {"delta_rule_forward", "k", "[7, 2, 4]"});
  p = good;
  p.in.beta = Tensor();
  expect_rejected([&] { forward(p, o, ht); }, {"beta: required tensor is undefined"});
  p = good;
  p.in.b = Tensor::zeros({7, 2, 4}, DType::f64);
  expect_rejected([&] { forward(p, o, ht); }, {"b: must be undefined for GateKind::beta"});
  p = good;
  p.in.g = Tensor::zeros({7, 2, 4}, DType::f64);  // per-channel decay given to a scalar-decay spec
  expect_rejected([&] { forward(p, o, ht); }, {"g", "[7, 2]"});
  p = good;
  p.spec.decay = DecayKind::none;
  expect_rejected([&] { forward(p, o, ht); }, {"g: must be undefined for DecayKind::none"});
  p = good;
  p.in.v = testing::to_f32(good.in.v);
  expect_rejected([&] { forward(p, o, ht); }, {"v: expected f64, got f32"});
  p = good;
  p.in.h0 = Tensor::zeros({1, 2, 4, 5}, DType::f64);
  expect_rejected([&] { forward(p, o, ht); }, {"h0", "[2, 2, 4, 5]"});
  p = good;
  p.seqs.cu_seqlens = {0, 3, 6};
  expect_rejected([&] { forward(p, o, ht); }, {"seqs", "ends at 6"});
  expect_rejected([&] { forward(good, o, Tensor::empty({2, 2, 5, 4}, DType::f64)); }, {"ht", "[2, 2, 4, 5]"});
  expect_rejected([&] { forward(good, Tensor::empty({7, 2, 4}, DType::f64), ht); }, {"o", "[7, 2, 5]"});

  for (int64_t i = 0; i < o.numel(); ++i) ASSERT_EQ(o.data<double>()[i], 7.0);
}

// Tensors labelled as CUDA ones (views of host memory that no check reads): the CUDA path's rules
// are enforced before any device work, with or without a CUDA build.
TEST(DeltaRuleArguments, CudaCallsAreCheckedFirst) {
  std::vector<float> memory(7 * 2 * 300 * 2);
  const auto on_cuda = [&](Shape shape, DType dtype) {
    return Tensor::view(memory.data(), shape, dtype, Device::cuda);
  };
  DeltaRuleProblem p;
  p.spec = {DecayKind::scalar, GateKind::beta, 0.5};
  p.seqs.cu_seqlens = {0, 3, 7};
  p.in.q = on_cuda({7, 2, 4}, DType::bf16), p.in.k = on_cuda({7, 2, 4}, DType::bf16);
  p.in.v = on_cuda({7, 2, 5}, DType::bf16), p.in.beta = on_cuda({7, 2}, DType::bf16);
  p.in.g = on_cuda({7, 2}, DType::f32);
  const Tensor o = on_cuda({7, 2, 5}, DType::bf16);
#ifdef LINEA_WITH_CUDA
  expect_rejected([&] { ops::delta_rule_forward(DeltaRuleImpl::recurrent, p.spec, p.seqs, p.in, o, Tensor(), o); },
                  {"delta_rule_forward: r: the recurrent CUDA kernel does not form the write error"});
  const ops::DeltaRuleGrads grads{on_cuda({7, 2, 4}, DType::bf16),
                                  on_cuda({7, 2, 4}, DType::bf16),
                                  on_cuda({7, 2, 5}, DType::bf16),
                                  on_cuda({7, 2}, DType::bf16),
                                  Tensor(),
                                  Tensor(),
                                  on_cuda({7, 2}, DType::f32),
                                  Tensor()};
  expect_rejected(
      [&] {
        ops::DeltaRuleGrads g = grads;
        ops::delta_rule_backward(DeltaRuleImpl::recurrent, p.spec, p.seqs, p.in, o, Tensor(), g);
      },
      {"delta_rule_backward: impl: the recurrent backward has no CUDA implementation"});
  DeltaRuleProblem bad = p;
  bad.in.g = on_cuda({7, 2}, DType::bf16);
  expect_rejected([&] { forward(bad, o, Tensor()); }, {"g: expected f32, got bf16"});
  bad = p;
  bad.in.k = Tensor::zeros({7, 2, 4}, DType::bf16);
  expect_rejected([&] { forward(bad, o, Tensor()); }, {"k: expected a cuda tensor (like q)"});
  expect_rejected([&] { forward(p, o, on_cuda({2, 2, 4, 5}, DType::bf16)); }, {"ht: expected f32, got bf16"});
  bad = p;
  bad.in.q = on_cuda({7, 2, 300}, DType::bf16), bad.in.k = on_cuda({7, 2, 300}, DType::bf16);
  expect_rejected([&] { forward(bad, o, Tensor()); }, {"q: the CUDA kernels take K ≤ 256, got K = 300"});
#else
  try {
    forward(p, o, Tensor());
    ADD_FAILURE() << "a CUDA tensor was accepted by a build without CUDA";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("this build has no CUDA backend"), std::string::npos) << e.what();
  }
#endif
}

TEST(DeltaRuleArguments, BackwardRejectsMissingOrMisplacedGradients) {
  const DeltaRuleProblem p = testing::make_delta_rule_problem(DecayKind::channel, GateKind::erase_write, kShape, 1, 6);
  const auto backward = [&](ops::DeltaRuleGrads grads, const Tensor& d_o) {
    ops::delta_rule_backward(DeltaRuleImpl::recurrent, p.spec, p.seqs, p.in, d_o, p.dht, grads);
  };
  const ops::DeltaRuleGrads good{zeros_like(p.in.q), zeros_like(p.in.k), zeros_like(p.in.v), Tensor(),
                                 zeros_like(p.in.b), zeros_like(p.in.w), zeros_like(p.in.g), Tensor()};
  EXPECT_NO_THROW(backward(good, p.d_o));

  ops::DeltaRuleGrads g = good;
  g.dg = Tensor();
  expect_rejected([&] { backward(g, p.d_o); }, {"delta_rule_backward", "dg: required tensor is undefined"});
  g = good;
  g.dbeta = Tensor::zeros({7, 2}, DType::f64);
  expect_rejected([&] { backward(g, p.d_o); }, {"dbeta: must be undefined for GateKind::erase_write"});
  g = good;
  g.dw = Tensor::zeros({7, 2, 4}, DType::f64);
  expect_rejected([&] { backward(g, p.d_o); }, {"dw", "[7, 2, 5]"});
  expect_rejected([&] { backward(good, Tensor::zeros({7, 2, 4}, DType::f64)); }, {"d_o", "[7, 2, 5]"});
}

}  // namespace
}  // namespace linea
