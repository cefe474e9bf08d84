// Causal softmax attention (ops::attention_forward/backward): finite-difference gradients in f64,
// an explicit-softmax oracle, hand cases, sequence isolation, f32 vs f64, determinism, bad input.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/random.h"
#include "model/mixers/attention/attention.h"
#include "tests/testing/assert_close.h"
#include "tests/testing/finite_difference.h"

namespace linea {
namespace {

using ops::AttentionShape;
using Named = std::tuple<const char*, Tensor, Tensor>;  // a name and two tensors to compare

// One attention problem: inputs, upstream gradient and what forward/backward produce.
struct Problem {
  AttentionShape shape;
  SeqLayout seqs;
  Tensor q, k, v, dout;
  Tensor out, lse, dq, dk, dv;

  Problem(AttentionShape s, SeqLayout layout, DType dtype, uint64_t seed) : shape(s), seqs(std::move(layout)) {
    const int64_t n = seqs.num_tokens();
    const int64_t qw = shape.q_heads * shape.head_dim, kvw = shape.kv_heads * shape.head_dim;
    Rng rng(seed);
    q = Tensor::empty({n, qw}, dtype);
    k = Tensor::empty({n, kvw}, dtype);
    v = Tensor::empty({n, kvw}, dtype);
    dout = Tensor::empty({n, qw}, dtype);
    for (Tensor* t : {&q, &k, &v, &dout}) fill_normal(*t, rng, 0, 1);
    allocate_outputs();
  }
  void allocate_outputs() {
    const DType dtype = q.dtype();
    out = Tensor::zeros(q.shape(), dtype);
    lse = Tensor::zeros({q.dim(0), shape.q_heads}, dtype);
    dq = Tensor::zeros(q.shape(), dtype);
    dk = Tensor::zeros(k.shape(), dtype);
    dv = Tensor::zeros(v.shape(), dtype);
  }
  void forward() { ops::attention_forward(out, lse, q, k, v, shape, seqs); }
  void backward() { ops::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, shape, seqs); }
  Problem to(DType dtype) const {
    Problem p = *this;
    p.q = convert(q, dtype), p.k = convert(k, dtype), p.v = convert(v, dtype), p.dout = convert(dout, dtype);
    p.allocate_outputs();
    return p;
  }
  static Tensor convert(const Tensor& t, DType dtype) {
    return dtype == DType::f64 ? testing::to_f64(t) : testing::to_f32(t);
  }
};

double at(const Tensor& t, int64_t row, int64_t col) { return t.data<double>()[row * t.dim(1) + col]; }

// Softmax written out over the full score row, as an oracle for the online-max forward.
void expect_matches_explicit_softmax(const Problem& p) {
  const int64_t hq = p.shape.q_heads, dh = p.shape.head_dim, group = hq / p.shape.kv_heads;
  for (int64_t si = 0; si < p.seqs.num_seqs(); ++si) {
    for (int64_t t = p.seqs.begin(si); t < p.seqs.end(si); ++t) {
      const int64_t first = p.shape.window > 0 ? std::max(p.seqs.begin(si), t - p.shape.window + 1) : p.seqs.begin(si);
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t g = h / group;
        std::vector<double> z;
        for (int64_t s = first; s <= t; ++s) {
          double d = 0;
          for (int64_t i = 0; i < dh; ++i) d += at(p.q, t, h * dh + i) * at(p.k, s, g * dh + i);
          z.push_back(p.shape.scale * d);
        }
        const double m = *std::max_element(z.begin(), z.end());
        double l = 0;
        for (double zi : z) l += std::exp(zi - m);
        EXPECT_NEAR(at(p.lse, t, h), m + std::log(l), 1e-12);
        for (int64_t i = 0; i < dh; ++i) {
          double o = 0;
          for (int64_t s = first; s <= t; ++s) o += std::exp(z[s - first] - m) / l * at(p.v, s, g * dh + i);
          EXPECT_NEAR(at(p.out, t, h * dh + i), o, 1e-12) << "token " << t << " head " << h;
        }
      }
    }
  }
}

// Packed layout with a one-token sequence, a sequence shorter than the window and a longer one.
SeqLayout packed_layout() { return SeqLayout{{0, 1, 3, 9}}; }

class AttentionWindow : public ::testing::TestWithParam<int64_t> {};

TEST_P(AttentionWindow, MatchesExplicitSoftmaxF64) {
  Problem p({.q_heads = 4, .kv_heads = 2, .head_dim = 5, .window = GetParam(), .scale = 0.4}, SeqLayout{{0, 7, 20}},
            DType::f64, 11);
  p.forward();
  expect_matches_explicit_softmax(p);
}

TEST_P(AttentionWindow, GradientsMatchFiniteDifferencesF64) {
  Problem p({.q_heads = 4, .kv_heads = 2, .head_dim = 3, .window = GetParam(), .scale = 0.7}, packed_layout(),
            DType::f64, 5);
  p.forward();
  p.backward();
  Problem probe = p;  // shares q, k, v storage: gradcheck perturbs them in place
  probe.out = Tensor::zeros(p.out.shape(), DType::f64);
  probe.lse = Tensor::zeros(p.lse.shape(), DType::f64);
  auto loss = [&] {
    probe.forward();
    return testing::dot(probe.out, p.dout);
  };
  for (const auto& [name, input, grad] : std::vector<Named>{{"dq", p.q, p.dq}, {"dk", p.k, p.dk}, {"dv", p.v, p.dv}}) {
    const testing::GradCheck r = testing::gradcheck(loss, input, grad, /*max_entries=*/input.numel());
    EXPECT_LT(r.max_rel_err, 1e-5) << name << ": max abs err " << r.max_abs_err;
    EXPECT_EQ(r.checked, input.numel());
  }
}

INSTANTIATE_TEST_SUITE_P(Windows, AttentionWindow, ::testing::Values(0, 1, 3),
                         [](const auto& info) { return "window" + std::to_string(info.param); });

TEST(Attention, HandCaseTwoTokens) {
  // Dh = 1, scale 1: token 1 scores z0 = q1·k0 = ln 3 and z1 = q1·k1 = 0, so weights 3/4 and 1/4.
  double q[] = {2.0, 1.0}, k[] = {std::log(3.0), 0.0}, v[] = {4.0, 8.0};
  double out[2], lse[2];
  ops::attention_forward(Tensor::view(out, {2, 1}, DType::f64), Tensor::view(lse, {2, 1}, DType::f64),
                         Tensor::view(q, {2, 1}, DType::f64), Tensor::view(k, {2, 1}, DType::f64),
                         Tensor::view(v, {2, 1}, DType::f64), {.scale = 1.0}, SeqLayout::uniform(1, 2));
  EXPECT_DOUBLE_EQ(out[0], 4.0);  // token 0 sees only itself
  EXPECT_DOUBLE_EQ(lse[0], 2.0 * std::log(3.0));
  EXPECT_DOUBLE_EQ(out[1], 0.75 * 4.0 + 0.25 * 8.0);
  EXPECT_DOUBLE_EQ(lse[1], std::log(4.0));
}

// Where a token sees only itself (one-token sequences, or window 1), out_t = v_t of its kv head,
// lse_t = scale·q_t·k_t, and the only gradient is dv_s = Σ_{h in group} dout_s.
void expect_self_attention_only(const Problem& p) {
  const int64_t dh = p.shape.head_dim, group = p.shape.q_heads / p.shape.kv_heads;
  for (int64_t t = 0; t < p.q.dim(0); ++t) {
    for (int64_t h = 0; h < p.shape.q_heads; ++h) {
      const int64_t g = h / group;
      double qk = 0;
      for (int64_t i = 0; i < dh; ++i) {
        EXPECT_NEAR(at(p.out, t, h * dh + i), at(p.v, t, g * dh + i), 1e-14);
        EXPECT_EQ(at(p.dq, t, h * dh + i), 0.0);
        qk += at(p.q, t, h * dh + i) * at(p.k, t, g * dh + i);
      }
      EXPECT_NEAR(at(p.lse, t, h), p.shape.scale * qk, 1e-14);
    }
    for (int64_t g = 0; g < p.shape.kv_heads; ++g) {
      for (int64_t i = 0; i < dh; ++i) {
        double sum = 0;
        for (int64_t h = g * group; h < (g + 1) * group; ++h) sum += at(p.dout, t, h * dh + i);
        EXPECT_NEAR(at(p.dv, t, g * dh + i), sum, 1e-14);
        EXPECT_EQ(at(p.dk, t, g * dh + i), 0.0);
      }
    }
  }
}

TEST(Attention, OneTokenSequencesAttendToThemselves) {
  Problem p({.q_heads = 2, .kv_heads = 1, .head_dim = 4, .window = 0, .scale = 0.5}, SeqLayout::uniform(5, 1),
            DType::f64, 3);
  p.forward();
  p.backward();
  expect_self_attention_only(p);
}

TEST(Attention, WindowOneGivesV) {
  Problem p({.q_heads = 4, .kv_heads = 2, .head_dim = 4, .window = 1, .scale = 0.5}, SeqLayout{{0, 6, 13}}, DType::f64,
            4);
  p.forward();
  p.backward();
  expect_self_attention_only(p);
}

TEST(Attention, SequencesDoNotSeeEachOther) {
  const AttentionShape shape{.q_heads = 2, .kv_heads = 2, .head_dim = 4, .window = 0, .scale = 0.5};
  Problem a(shape, SeqLayout{{0, 6, 14}}, DType::f64, 8);
  a.forward();
  a.backward();
  Problem b = a.to(DType::f64);  // deep copy, then change every input of sequence 2 (tokens 6..13)
  for (Tensor* t : {&b.q, &b.k, &b.v, &b.dout}) {
    for (int64_t i = 6 * t->dim(1); i < t->numel(); ++i) t->data<double>()[i] += 1.5;
  }
  b.forward();
  b.backward();
  for (const auto& [name, x, y] : std::vector<Named>{
           {"out", a.out, b.out}, {"lse", a.lse, b.lse}, {"dq", a.dq, b.dq}, {"dk", a.dk, b.dk}, {"dv", a.dv, b.dv}}) {
    const int64_t first_half = 6 * x.dim(1);
    EXPECT_EQ(std::memcmp(x.raw(), y.raw(), first_half * sizeof(double)), 0) << name << " of sequence 1 changed";
    EXPECT_NE(std::memcmp(x.data<double>() + first_half, y.data<double>() + first_half,
                          (x.numel() - first_half) * sizeof(double)),
              0)
        << name << " of sequence 2 should change";
  }
}

TEST(Attention, F32MatchesF64) {
  for (int64_t window : {0, 7}) {
    Problem ref({.q_heads = 4, .kv_heads = 1, .head_dim = 16, .window = window, .scale = 0.25}, SeqLayout{{0, 37, 80}},
                DType::f64, 21);
    Problem f32 = ref.to(DType::f32);
    ref.forward(), ref.backward();
    f32.forward(), f32.backward();
    for (const auto& [name, x, y] : std::vector<Named>{{"out", ref.out, f32.out},
                                                       {"lse", ref.lse, f32.lse},
                                                       {"dq", ref.dq, f32.dq},
                                                       {"dk", ref.dk, f32.dk},
                                                       {"dv", ref.dv, f32.dv}}) {
      EXPECT_TRUE(testing::assert_close(std::string(name) + " window " + std::to_string(window), x, y, 1e-5, 0));
    }
  }
}

TEST(Attention, LargeScoresStayFinite) {
  // Scores near ±1e4 overflow exp() without max subtraction.
  Problem p({.q_heads = 1, .kv_heads = 1, .head_dim = 8, .window = 0, .scale = 100.0}, SeqLayout::uniform(1, 30),
            DType::f32, 9);
  p.forward();
  p.backward();
  for (const Tensor* t : {&p.out, &p.lse, &p.dq, &p.dk, &p.dv}) {
    for (int64_t i = 0; i < t->numel(); ++i) ASSERT_TRUE(std::isfinite(t->data<float>()[i])) << t->describe();
  }
}

TEST(Attention, ResultsDoNotDependOnThreadCount) {
  Problem one({.q_heads = 4, .kv_heads = 2, .head_dim = 8, .window = 5, .scale = 0.3}, SeqLayout{{0, 50, 64}},
              DType::f32, 13);
  Problem two = one.to(DType::f32);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  one.forward(), one.backward();
  omp_set_num_threads(3);
  two.forward(), two.backward();
  omp_set_num_threads(saved);
  for (const auto& [name, x, y] : std::vector<Named>{{"out", one.out, two.out},
                                                     {"lse", one.lse, two.lse},
                                                     {"dq", one.dq, two.dq},
                                                     {"dk", one.dk, two.dk},
                                                     {"dv", one.dv, two.dv}}) {
    EXPECT_EQ(std::memcmp(x.raw(), y.raw(), x.nbytes()), 0) << name;
  }
}

// Runs f, expecting std::invalid_argument whose message contains `needle`.
template <class F>
void expect_rejected(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "accepted; expected an error mentioning '" << needle << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Attention, BadArgumentsAreRejected) {
  const AttentionShape shape{.q_heads = 4, .kv_heads = 2, .head_dim = 3, .window = 0, .scale = 1.0};
  Problem p(shape, SeqLayout{{0, 2, 5}}, DType::f64, 1);
  auto forward_with = [&](AttentionShape s, const SeqLayout& seqs) {
    return [&p, s, seqs] { ops::attention_forward(p.out, p.lse, p.q, p.k, p.v, s, seqs); };
  };
  AttentionShape bad = shape;
  bad.kv_heads = 3;
  expect_rejected(forward_with(bad, p.seqs), "q_heads (4) must be a multiple of kv_heads (3)");
  bad = shape;
  bad.window = -1;
  expect_rejected(forward_with(bad, p.seqs), "window");
  bad = shape;
  bad.head_dim = 0;
  expect_rejected(forward_with(bad, p.seqs), "must be positive");
  expect_rejected(forward_with(shape, SeqLayout{{0, 2, 4}}), "attention_forward: seqs");

  const Tensor wide_k = Tensor::zeros({5, 9}, DType::f64);
  expect_rejected([&] { ops::attention_forward(p.out, p.lse, p.q, wide_k, p.v, shape, p.seqs); },
                  "attention_forward: k: expected shape [5, 6], got [5, 9]");
  const Tensor short_v = Tensor::zeros({4, 6}, DType::f64);
  expect_rejected([&] { ops::attention_forward(p.out, p.lse, p.q, p.k, short_v, shape, p.seqs); },
                  "attention_forward: v: expected shape [5, 6]");
  const Tensor bad_lse = Tensor::zeros({5, 2}, DType::f64);
  expect_rejected([&] { ops::attention_forward(p.out, bad_lse, p.q, p.k, p.v, shape, p.seqs); },
                  "attention_forward: lse: expected shape [5, 4]");
  const Tensor q3 = Tensor::zeros({5, 4, 3}, DType::f64);
  expect_rejected([&] { ops::attention_forward(p.out, p.lse, q3, p.k, p.v, shape, p.seqs); },
                  "attention_forward: q: must be 2-D");
  const Tensor k32 = Tensor::zeros({5, 6}, DType::f32);
  expect_rejected([&] { ops::attention_forward(p.out, p.lse, p.q, k32, p.v, shape, p.seqs); },
                  "attention_forward: k: expected f64 (like q)");
  const Tensor q_int = Tensor::zeros({5, 12}, DType::i32);
  expect_rejected([&] { ops::attention_forward(p.out, p.lse, q_int, p.k, p.v, shape, p.seqs); },
                  "attention_forward: q: expected an f32 or f64 tensor");
  expect_rejected(
      [&] { ops::attention_backward(p.dq, Tensor(), p.dv, p.dout, p.q, p.k, p.v, p.out, p.lse, shape, p.seqs); },
      "attention_backward: dk: required tensor is undefined");
  const Tensor short_dout = Tensor::zeros({5, 11}, DType::f64);
  expect_rejected(
      [&] { ops::attention_backward(p.dq, p.dk, p.dv, short_dout, p.q, p.k, p.v, p.out, p.lse, shape, p.seqs); },
      "attention_backward: dout: expected shape [5, 12]");

  // attention_over_cache: each query names a sequence of the caches and a position whose keys fit
  const Tensor cache = Tensor::zeros({2, 3, 6}, DType::f64);  // 2 sequences, 3 rows
  const auto over_cache = [&](std::vector<int32_t> pairs) {
    return [&p, shape, pairs, &cache] {
      std::vector<int32_t> q = pairs;
      ops::attention_over_cache(p.out, p.q, cache, cache, Tensor::view(q.data(), {5, 2}, DType::i32), shape);
    };
  };
  expect_rejected(over_cache({0, 0, 1, 0, 1, 1, 2, 0, 0, 1}), "query 3 (sequence 2, position 0) is not a position");
  expect_rejected(over_cache({0, 0, 1, -1, 1, 1, 1, 2, 0, 1}), "query 1 (sequence 1, position -1)");
  expect_rejected(over_cache({0, 0, 1, 0, 1, 1, 1, 2, 0, 3}),
                  "attention_over_cache: k_cache: query 4 sees 4 keys, more than the cache's 3 rows");
}

}  // namespace
}  // namespace linea
