// gla_forward / gla_backward reject bad arguments with std::invalid_argument naming the op and the
// argument, before writing anything.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "tests/testing/kernel_test.h"
#include "tests/testing/mixers/gla_problem.h"

namespace linea {
namespace {

using ops::GlaImpl;
using ops::GlaMixer;
using testing::GlaProblem;
using testing::throws_invalid_argument;

const testing::GlaShape kShape{{0, 3, 7}, 2, 4, 5, true};

void forward(const GlaProblem& p, Tensor o, Tensor ht) {
  ops::gla_forward(GlaImpl::chunked, p.spec, p.seqs, p.in, o, ht);
}

TEST(GlaArguments, ForwardRejectsBadInputsAndLeavesOutputsUntouched) {
  const GlaProblem gla = testing::make_gla_problem(GlaMixer::gla, kShape, 1, 5);
  Tensor o = Tensor::empty({7, 2, 5}, DType::f64);
  fill_constant(o, 7);
  const Tensor ht = Tensor::empty({2, 2, 4, 5}, DType::f64);

  GlaProblem p = gla;
  p.in.k = Tensor::zeros({7, 2, 3}, DType::f64);
  EXPECT_TRUE(throws_invalid_argument([&] { forward(p, o, ht); }, {"gla_forward", "k", "[7, 2, 4]"}));
  p = gla;
  p.in.k = Tensor();
  EXPECT_TRUE(throws_invalid_argument([&] { forward(p, o, ht); }, {"k: required tensor is undefined"}));
  p = gla;
  p.in.g = Tensor::zeros({7, 2}, DType::f64);  // a scalar decay given to a per-channel spec
  EXPECT_TRUE(throws_invalid_argument([&] { forward(p, o, ht); }, {"g", "[7, 2, 4]"}));
  p = gla;
  p.in.u = Tensor::zeros({2, 4}, DType::f64);
  EXPECT_TRUE(throws_invalid_argument([&] { forward(p, o, ht); }, {"u: must be undefined without the bonus"}));
  p = gla;
  p.in.v = testing::to_f32(gla.in.v);
  EXPECT_TRUE(throws_invalid_argument([&] { forward(p, o, ht); }, {"v", "expected f64"}));
  p = gla;
  p.in.h0 = Tensor::zeros({1, 2, 4, 5}, DType::f64);
  EXPECT_TRUE(throws_invalid_argument([&] { forward(p, o, ht); }, {"h0", "[2, 2, 4, 5]"}));
  p = gla;
  p.seqs.cu_seqlens = {0, 3, 6};
  EXPECT_TRUE(throws_invalid_argument([&] { forward(p, o, ht); }, {"gla_forward: seqs"}));
  p = gla;
  p.spec.decay = ops::GlaDecay::scalar;
  p.spec.key = ops::GlaKey::one_minus_decay;
  p.in.k = Tensor();
  p.in.g = Tensor::zeros({7, 2}, DType::f64);
  EXPECT_TRUE(throws_invalid_argument([&] { forward(p, o, ht); }, {"spec", "needs a per-channel decay"}));
  EXPECT_TRUE(throws_invalid_argument([&] { forward(gla, Tensor::zeros({7, 2, 4}, DType::f64), ht); }, {"o"}));
  EXPECT_TRUE(throws_invalid_argument([&] { forward(gla, o, Tensor::zeros({2, 2, 5, 4}, DType::f64)); }, {"ht"}));

  const GlaProblem hgrn2 = testing::make_gla_problem(GlaMixer::hgrn2, kShape, 1, 6);
  p = hgrn2;
  p.in.k = gla.in.k;
  EXPECT_TRUE(throws_invalid_argument([&] { forward(p, o, ht); }, {"k: must be undefined", "tied to the decay"}));
  const GlaProblem rwkv6 = testing::make_gla_problem(GlaMixer::rwkv6, kShape, 1, 7);
  p = rwkv6;
  p.in.u = Tensor::zeros({2, 5}, DType::f64);
  EXPECT_TRUE(throws_invalid_argument([&] { forward(p, o, ht); }, {"u", "[2, 4]"}));
  const GlaProblem retnet = testing::make_gla_problem(GlaMixer::retnet, kShape, 1, 8);
  p = retnet;
  p.in.g = Tensor::zeros({7, 2}, DType::f64);
  EXPECT_TRUE(throws_invalid_argument([&] { forward(p, o, ht); }, {"g", "[2]"}));

  for (int64_t i = 0; i < o.numel(); ++i) ASSERT_EQ(o.data<double>()[i], 7.0);
}

TEST(GlaArguments, BackwardRejectsBadGradients) {
  const GlaProblem retnet = testing::make_gla_problem(GlaMixer::retnet, kShape, 1, 9);
  const testing::GlaResult r = testing::run_forward_backward(GlaImpl::recurrent, retnet);
  ops::GlaGrads grads = r.grads;
  grads.dg = Tensor::zeros({2}, DType::f64);
  const auto backward = [&] {
    ops::gla_backward(GlaImpl::chunked, retnet.spec, retnet.seqs, retnet.in, retnet.d_o, retnet.dht, grads);
  };
  EXPECT_TRUE(throws_invalid_argument(backward, {"gla_backward", "dg: must be undefined", "fixed per-head decay"}));
  grads = r.grads;
  grads.dv = Tensor::zeros({7, 2, 4}, DType::f64);
  EXPECT_TRUE(throws_invalid_argument(backward, {"dv", "[7, 2, 5]"}));
  grads = r.grads;
  grads.dq = Tensor();
  EXPECT_TRUE(throws_invalid_argument(backward, {"dq: required tensor is undefined"}));

  const GlaProblem rwkv6 = testing::make_gla_problem(GlaMixer::rwkv6, kShape, 1, 10);
  ops::GlaGrads rwkv6_grads = testing::run_forward_backward(GlaImpl::recurrent, rwkv6).grads;
  rwkv6_grads.du = Tensor();
  EXPECT_TRUE(throws_invalid_argument(
      [&] { ops::gla_backward(GlaImpl::chunked, rwkv6.spec, rwkv6.seqs, rwkv6.in, rwkv6.d_o, rwkv6.dht, rwkv6_grads); },
      {"du: required tensor is undefined"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::gla_backward(GlaImpl::chunked, rwkv6.spec, rwkv6.seqs, rwkv6.in, Tensor::zeros({7, 2, 4}, DType::f64),
                          rwkv6.dht, rwkv6_grads);
      },
      {"d_o", "[7, 2, 5]"}));
}

// The CPU op saves nothing (ops::gla_saved_bytes = 0, whatever the mixer), so a saved buffer given to
// the forward or the backward is refused by name before anything is written.
TEST(GlaArguments, CpuSavesNothingAndRefusesASavedBuffer) {
  const Tensor saved = Tensor::empty({1024}, DType::bf16);
  for (GlaMixer m : ops::gla_mixers()) {
    const GlaProblem p = testing::make_gla_problem(m, kShape, 1, 11);
    EXPECT_EQ(0u, ops::gla_saved_bytes(p.spec, p.seqs, p.in)) << ops::gla_mixer_name(m);
    Tensor o = Tensor::empty({7, 2, 5}, DType::f64);
    fill_constant(o, 7);
    for (GlaImpl impl : {GlaImpl::chunked, GlaImpl::recurrent}) {
      EXPECT_TRUE(throws_invalid_argument([&] { ops::gla_forward(impl, p.spec, p.seqs, p.in, o, Tensor(), saved); },
                                          {"gla_forward", "saved: this call saves nothing (gla_saved_bytes = 0)"}));
    }
    for (int64_t i = 0; i < o.numel(); ++i) ASSERT_EQ(o.data<double>()[i], 7.0);
    ops::GlaGrads grads = testing::run_forward_backward(GlaImpl::recurrent, p).grads;
    EXPECT_TRUE(throws_invalid_argument(
        [&] { ops::gla_backward(GlaImpl::chunked, p.spec, p.seqs, p.in, p.d_o, p.dht, grads, saved); },
        {"gla_backward", "saved: this call saves nothing"}));
  }
}

}  // namespace
}  // namespace linea
