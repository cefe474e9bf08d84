// HGRN's elementwise recurrence (model/mixers/hgrn/hgrn.h): the recurrent reference against the
// unrolled sum and finite differences (f64), the chunked scan against the recurrent reference (f64
// to 1e-10, f32 within err_ratio 1e-5 of f64) on packed sequences that cross chunks, with and
// without h0, at fla's gate normalizers; and the argument checks.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/random.h"
#include "model/mixers/hgrn/hgrn.h"
#include "tests/testing/assert_close.h"
#include "tests/testing/finite_difference.h"
#include "tests/testing/kernel_test.h"
#include "tests/testing/mixers/random_problem.h"

namespace linea {
namespace {

using ops::HgrnImpl;

struct Problem {
  SeqLayout seqs;
  ops::HgrnInputs in;
  Tensor d_o, dht;
};

// x, h0, d_o, dht ~ N(0, 1); g = logsigmoid(N(0, 1)) / normalizer.
Problem make_problem(std::vector<int64_t> cu_seqlens, int64_t D, bool with_h0, double normalizer, uint64_t seed) {
  Rng rng(seed);
  Problem p;
  p.seqs.cu_seqlens = std::move(cu_seqlens);
  const int64_t N = p.seqs.num_tokens(), S = p.seqs.num_seqs();
  const auto normal = [&](Shape shape) {
    Tensor t = Tensor::empty(std::move(shape), DType::f64);
    fill_normal(t, rng, 0, 1);
    return t;
  };
  p.in.x = normal({N, D});
  p.in.g = normal({N, D});
  for (int64_t i = 0; i < p.in.g.numel(); ++i) {
    double& g = p.in.g.data<double>()[i];
    g = -std::log1p(std::exp(-g)) / normalizer;
  }
  if (with_h0) p.in.h0 = normal({S, D});
  p.d_o = normal({N, D});
  p.dht = normal({S, D});
  return p;
}

Problem cast(const Problem& p, DType dtype) {
  Problem c = p;
  for (Tensor* t : {&c.in.x, &c.in.g, &c.in.h0, &c.d_o, &c.dht}) {
    if (t->defined()) *t = testing::as_dtype(*t, dtype);
  }
  return c;
}

struct Result {
  Tensor o, ht;
  ops::HgrnGrads grads;
  std::vector<std::pair<std::string, Tensor>> named() const {
    return {{"o", o}, {"ht", ht}, {"dx", grads.dx}, {"dg", grads.dg}, {"dh0", grads.dh0}};
  }
};

Result run(HgrnImpl impl, const Problem& p) {
  const DType dt = p.in.x.dtype();
  Result r;
  r.o = Tensor::zeros(p.in.x.shape(), dt);
  r.ht = Tensor::zeros(p.dht.shape(), dt);
  ops::hgrn_forward(impl, p.seqs, p.in, r.o, r.ht);
  r.grads = {Tensor::zeros(p.in.x.shape(), dt), Tensor::zeros(p.in.x.shape(), dt), Tensor::zeros(p.dht.shape(), dt)};
  ops::hgrn_backward(impl, p.seqs, p.in, p.d_o, p.dht, r.grads);
  return r;
}

double loss(HgrnImpl impl, const Problem& p) {
  Tensor o = Tensor::zeros(p.in.x.shape(), DType::f64), ht = Tensor::zeros(p.dht.shape(), DType::f64);
  ops::hgrn_forward(impl, p.seqs, p.in, o, ht);
  return testing::dot(o, p.d_o) + testing::dot(ht, p.dht);
}

class Hgrn : public ::testing::TestWithParam<HgrnImpl> {};

// o_t = Π_{b≤s≤t} a_s h0 + Σ_{b≤j≤t} (Π_{j<s≤t} a_s) x_j, the products taken factor by factor.
TEST_P(Hgrn, MatchesTheUnrolledSum) {
  const Problem p = make_problem({0, 9, 10, 80}, 3, true, 1.0, 1);
  const Result r = run(GetParam(), p);
  const int64_t D = 3;
  Tensor o = Tensor::zeros(p.in.x.shape(), DType::f64);
  for (int64_t s = 0; s < p.seqs.num_seqs(); ++s) {
    for (int64_t t = p.seqs.begin(s); t < p.seqs.end(s); ++t) {
      for (int64_t c = 0; c < D; ++c) {
        double decay = 1;
        for (int64_t i = p.seqs.begin(s); i <= t; ++i) decay *= std::exp(p.in.g.data<double>()[i * D + c]);
        double sum = decay * p.in.h0.data<double>()[s * D + c];
        for (int64_t j = p.seqs.begin(s); j <= t; ++j) {
          double d = 1;
          for (int64_t i = j + 1; i <= t; ++i) d *= std::exp(p.in.g.data<double>()[i * D + c]);
          sum += d * p.in.x.data<double>()[j * D + c];
        }
        o.data<double>()[t * D + c] = sum;
      }
    }
  }
  EXPECT_TRUE(testing::assert_close("o", o, r.o, 1e-12, 0));
}

// Sequences of 1, 3, 0 and 140 tokens: 140 crosses two chunk boundaries; the empty one passes h0 to
// ht (and dht to dh0).
TEST_P(Hgrn, EveryInputMatchesFiniteDifferences) {
  Problem p = make_problem({0, 1, 4, 4, 144}, 5, true, 1.0, 2);
  const Result r = run(GetParam(), p);
  const auto L = [&] { return loss(GetParam(), p); };
  for (const auto& [name, input, grad] : {std::tuple{"x", p.in.x, r.grads.dx}, std::tuple{"g", p.in.g, r.grads.dg},
                                          std::tuple{"h0", p.in.h0, r.grads.dh0}}) {
    testing::expect_gradient_matches(name, L, input, grad, 64);
  }
}

INSTANTIATE_TEST_SUITE_P(BothImpls, Hgrn, ::testing::Values(HgrnImpl::recurrent, HgrnImpl::chunked),
                         [](const auto& info) { return info.param == HgrnImpl::recurrent ? "recurrent" : "chunked"; });

TEST(HgrnChunked, MatchesRecurrent) {
  for (double normalizer : {0.01, 0.1, 1.0, 10.0}) {
    for (bool with_h0 : {true, false}) {
      const Problem p64 = make_problem({0, 15, 100, 300, 301}, 37, with_h0, normalizer, 3);
      const Result ref = run(HgrnImpl::recurrent, p64);
      const Result got64 = run(HgrnImpl::chunked, p64);
      const Result got32 = run(HgrnImpl::chunked, cast(p64, DType::f32));
      const auto r = ref.named(), g64 = got64.named(), g32 = got32.named();
      for (size_t i = 0; i < r.size(); ++i) {
        EXPECT_TRUE(testing::assert_close(r[i].first + " (f64)", r[i].second, g64[i].second, 1e-10, 0))
            << "normalizer " << normalizer;
        EXPECT_TRUE(testing::assert_close(r[i].first + " (f32)", r[i].second, g32[i].second, 1e-5, 0))
            << "normalizer " << normalizer;
      }
    }
  }
}

TEST(HgrnArguments, RejectsBadTensors) {
  const Problem good = make_problem({0, 3, 7}, 4, true, 1.0, 4);
  Tensor o = Tensor::zeros({7, 4}, DType::f64), ht = Tensor::zeros({2, 4}, DType::f64);
  Problem p = good;
  p.in.g = Tensor::zeros({7, 3}, DType::f64);
  EXPECT_TRUE(testing::throws_invalid_argument([&] { ops::hgrn_forward(HgrnImpl::chunked, p.seqs, p.in, o, ht); },
                                               {"hgrn_forward", "g", "[7, 4]"}));
  p = good;
  p.in.h0 = Tensor::zeros({1, 4}, DType::f64);
  EXPECT_TRUE(testing::throws_invalid_argument([&] { ops::hgrn_forward(HgrnImpl::recurrent, p.seqs, p.in, o, ht); },
                                               {"h0", "[2, 4]"}));
  p = good;
  p.seqs.cu_seqlens = {0, 8};
  EXPECT_TRUE(testing::throws_invalid_argument([&] { ops::hgrn_forward(HgrnImpl::chunked, p.seqs, p.in, o, ht); },
                                               {"hgrn_forward: seqs"}));
  ops::HgrnGrads grads{Tensor::zeros({7, 4}, DType::f64), Tensor::zeros({7, 4}, DType::f32), Tensor()};
  EXPECT_TRUE(testing::throws_invalid_argument(
      [&] { ops::hgrn_backward(HgrnImpl::chunked, good.seqs, good.in, good.d_o, good.dht, grads); },
      {"hgrn_backward", "dg", "expected f64"}));
}

}  // namespace
}  // namespace linea
