// The element-wise ops of the gated-linear-attention and HGRN layers (kernels/ops.h): forward values
// against closed forms, every backward against finite differences in f64, f32 against f64, and the
// stability of the gates at extreme inputs.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/ops.h"
#include "tests/testing/kernel_test.h"

namespace linea {
namespace {

using testing::as_dtype;
using testing::dot;
using testing::gradient_matches;
using testing::random_tensor;

double log_sigmoid(double x) { return -std::log1p(std::exp(-x)); }
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

TEST(LogForgetGate, MatchesItsDefinition) {
  Rng rng(1);
  const Tensor x = random_tensor({6, 5}, rng, -8, 8), lb = random_tensor({5}, rng, 0, 0.9);
  Tensor g = Tensor::empty({6, 5}, DType::f64), plain = Tensor::empty({6, 5}, DType::f64);
  ops::log_forget_gate_forward(g, x, lb, 2.0);
  ops::log_forget_gate_forward(plain, x, Tensor(), 16.0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double s = sigmoid(x.data<double>()[i]), b = lb.data<double>()[i % 5];
    EXPECT_NEAR(g.data<double>()[i], std::log(b + (1 - b) * s) / 2, 1e-14);
    EXPECT_NEAR(plain.data<double>()[i], log_sigmoid(x.data<double>()[i]) / 16, 1e-15);
  }
}

TEST(LogForgetGate, StaysFiniteAtExtremeLogits) {
  Tensor x = Tensor::empty({1, 3}, DType::f32), lb = Tensor::empty({3}, DType::f32);
  x.data<float>()[0] = -200, x.data<float>()[1] = 200, x.data<float>()[2] = -200;
  lb.data<float>()[0] = 0.25f, lb.data<float>()[1] = 0.25f, lb.data<float>()[2] = 0;
  Tensor g = Tensor::empty({1, 3}, DType::f32), dx = Tensor::empty({1, 3}, DType::f32);
  Tensor dlb = Tensor::zeros({3}, DType::f32), dg = Tensor::empty({1, 3}, DType::f32);
  fill_constant(dg, 1);
  ops::log_forget_gate_forward(g, x, lb, 1.0);
  EXPECT_NEAR(g.data<float>()[0], std::log(0.25f), 1e-6);  // the bound holds
  EXPECT_NEAR(g.data<float>()[1], 0.0f, 1e-6);
  EXPECT_NEAR(g.data<float>()[2], -200.0f, 1e-3);  // no bound: logsigmoid
  ops::log_forget_gate_backward(dx, Tensor(), dg, x, lb, 1.0);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isfinite(dx.data<float>()[i])) << i;
}

TEST(LogForgetGate, BackwardMatchesFiniteDifferences) {
  Rng rng(2);
  Tensor x = random_tensor({7, 4}, rng, -4, 4), lb = random_tensor({4}, rng, 0.05, 0.9);
  const Tensor dg = random_tensor({7, 4}, rng);
  Tensor g = Tensor::empty({7, 4}, DType::f64);
  for (bool bounded : {true, false}) {
    const Tensor bound = bounded ? lb : Tensor();
    auto loss = [&] {
      ops::log_forget_gate_forward(g, x, bound, 3.0);
      return dot(g, dg);
    };
    Tensor dx = Tensor::empty({7, 4}, DType::f64), dlb = Tensor::zeros({4}, DType::f64);
    ops::log_forget_gate_backward(dx, bounded ? dlb : Tensor(), dg, x, bound, 3.0);
    EXPECT_TRUE(gradient_matches("dlogits", loss, x, dx));
    if (bounded) {
      EXPECT_TRUE(gradient_matches("dlower_bound", loss, lb, dlb));
    }
  }
}

TEST(ForgetInput, BackwardMatchesFiniteDifferences) {
  Rng rng(3);
  Tensor i = random_tensor({5, 6}, rng, -3, 3), g = random_tensor({5, 6}, rng, -4, 0);
  const Tensor dout = random_tensor({5, 6}, rng);
  Tensor out = Tensor::empty({5, 6}, DType::f64);
  ops::forget_input_forward(out, i, g);
  const double x0 = i.data<double>()[0];
  EXPECT_NEAR(out.data<double>()[0], x0 * sigmoid(x0) * (1 - std::exp(g.data<double>()[0])), 1e-15);
  auto loss = [&] {
    ops::forget_input_forward(out, i, g);
    return dot(out, dout);
  };
  Tensor di = Tensor::empty({5, 6}, DType::f64), dg = Tensor::empty({5, 6}, DType::f64);
  ops::forget_input_backward(di, dg, dout, i, g);
  EXPECT_TRUE(gradient_matches("di", loss, i, di));
  EXPECT_TRUE(gradient_matches("dg", loss, g, dg));
}

TEST(ExpDecay, BackwardMatchesFiniteDifferences) {
  Rng rng(4);
  Tensor w = random_tensor({4, 5}, rng, -3, 2);
  const Tensor dg = random_tensor({4, 5}, rng);
  Tensor g = Tensor::empty({4, 5}, DType::f64);
  auto loss = [&] {
    ops::exp_decay_forward(g, w);
    return dot(g, dg);
  };
  loss();
  EXPECT_DOUBLE_EQ(g.data<double>()[3], -std::exp(w.data<double>()[3]));
  Tensor dw = Tensor::empty({4, 5}, DType::f64);
  ops::exp_decay_backward(dw, dg, g);
  EXPECT_TRUE(gradient_matches("dw", loss, w, dw));
}

TEST(SsdGate, BackwardMatchesFiniteDifferences) {
  Rng rng(5);
  Tensor dt = random_tensor({9, 3}, rng, -4, 4), A_log = random_tensor({3}, rng, 0, 2.7);
  Tensor dt_bias = random_tensor({3}, rng, -3, 0);
  const Tensor dg = random_tensor({9, 3}, rng), ddelta = random_tensor({9, 3}, rng);
  Tensor g = Tensor::empty({9, 3}, DType::f64), delta = Tensor::empty({9, 3}, DType::f64);
  auto loss = [&] {
    ops::ssd_gate_forward(g, delta, dt, A_log, dt_bias);
    return dot(g, dg) + dot(delta, ddelta);
  };
  loss();
  const double a = dt.data<double>()[4] + dt_bias.data<double>()[1];
  EXPECT_NEAR(delta.data<double>()[4], std::log1p(std::exp(a)), 1e-15);
  EXPECT_NEAR(g.data<double>()[4], -std::exp(A_log.data<double>()[1]) * delta.data<double>()[4], 1e-14);
  Tensor ddt = Tensor::empty({9, 3}, DType::f64), dA = Tensor::zeros({3}, DType::f64);
  Tensor db = Tensor::zeros({3}, DType::f64);
  ops::ssd_gate_backward(ddt, dA, db, dg, ddelta, dt, A_log, dt_bias);
  EXPECT_TRUE(gradient_matches("ddt", loss, dt, ddt));
  EXPECT_TRUE(gradient_matches("dA_log", loss, A_log, dA));
  EXPECT_TRUE(gradient_matches("ddt_bias", loss, dt_bias, db));
}

class Activations : public ::testing::TestWithParam<ops::Activation> {};

TEST_P(Activations, BackwardMatchesFiniteDifferencesAndF32AgreesWithF64) {
  const ops::Activation act = GetParam();
  Rng rng(6);
  Tensor x = random_tensor({6, 7}, rng, -5, 5);
  const Tensor dout = random_tensor({6, 7}, rng);
  Tensor out = Tensor::empty({6, 7}, DType::f64);
  auto loss = [&] {
    ops::activation_forward(out, x, act);
    return dot(out, dout);
  };
  loss();
  const double x0 = x.data<double>()[0];
  EXPECT_NEAR(out.data<double>()[0], act == ops::Activation::silu ? x0 * sigmoid(x0) : std::tanh(x0), 1e-15);
  Tensor dx = Tensor::empty({6, 7}, DType::f64);
  ops::activation_backward(dx, dout, act == ops::Activation::silu ? x : out, act);
  EXPECT_TRUE(gradient_matches("dx", loss, x, dx));
  Tensor out32 = Tensor::empty({6, 7}, DType::f32);
  ops::activation_forward(out32, as_dtype(x, DType::f32), act);
  EXPECT_TRUE(testing::assert_close("out f32", out, out32, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(SiluAndTanh, Activations, ::testing::Values(ops::Activation::silu, ops::Activation::tanh));

TEST(TokenShift, ShiftsWithinSequencesAndBackwardMatchesFiniteDifferences) {
  Rng rng(7);
  SeqLayout seqs;
  seqs.cu_seqlens = {0, 3, 3, 4, 9};  // an empty and a one-token sequence
  Tensor x = random_tensor({9, 2}, rng);
  const Tensor dd = random_tensor({9, 2}, rng);
  Tensor delta = Tensor::empty({9, 2}, DType::f64);
  auto loss = [&] {
    ops::token_shift_forward(delta, x, seqs);
    return dot(delta, dd);
  };
  loss();
  const double* xs = x.data<double>();
  for (int64_t t : {0, 3, 4}) EXPECT_DOUBLE_EQ(delta.data<double>()[t * 2 + 1], -xs[t * 2 + 1]) << t;
  EXPECT_DOUBLE_EQ(delta.data<double>()[5 * 2], xs[4 * 2] - xs[5 * 2]);
  Tensor dx = Tensor::empty({9, 2}, DType::f64);
  ops::token_shift_backward(dx, dd, seqs);
  EXPECT_TRUE(gradient_matches("dx", loss, x, dx));
}

TEST(GroupNorm, NormalisesEachGroupAndBackwardMatchesFiniteDifferences) {
  Rng rng(8);
  const int64_t n = 5, groups = 3, width = 12;
  Tensor x = random_tensor({n, width}, rng, -2, 3), w = random_tensor({width}, rng, 0.5, 1.5);
  Tensor b = random_tensor({width}, rng);
  const Tensor dout = random_tensor({n, width}, rng);
  Tensor out = Tensor::empty({n, width}, DType::f64), mean = Tensor::empty({n, groups}, DType::f64);
  Tensor rstd = Tensor::empty({n, groups}, DType::f64);
  auto loss = [&] {
    ops::group_norm_forward(out, mean, rstd, x, w, b, groups, 1e-5);
    return dot(out, dout);
  };
  loss();
  // Group 1 of row 2, by hand.
  const double* row = x.data<double>() + 2 * width + 4;
  double mu = 0, var = 0;
  for (int p = 0; p < 4; ++p) mu += row[p] / 4;
  for (int p = 0; p < 4; ++p) var += (row[p] - mu) * (row[p] - mu) / 4;
  EXPECT_NEAR(out.data<double>()[2 * width + 5],
              (row[1] - mu) / std::sqrt(var + 1e-5) * w.data<double>()[5] + b.data<double>()[5], 1e-13);
  Tensor dx = Tensor::empty({n, width}, DType::f64), dw = Tensor::zeros({width}, DType::f64);
  Tensor db = Tensor::zeros({width}, DType::f64);
  ops::group_norm_backward(dx, dw, db, dout, x, w, mean, rstd, groups);
  EXPECT_TRUE(gradient_matches("dx", loss, x, dx));
  EXPECT_TRUE(gradient_matches("dweight", loss, w, dw));
  EXPECT_TRUE(gradient_matches("dbias", loss, b, db));
}

TEST(HeadBroadcast, BackwardsMatchFiniteDifferences) {
  Rng rng(9);
  const int64_t n = 4, heads = 3, width = 5;
  Tensor x = random_tensor({n, width}, rng), xh = random_tensor({n, heads * width}, rng);
  Tensor s = random_tensor({n, heads}, rng), D = random_tensor({heads}, rng);
  const Tensor dout = random_tensor({n, heads * width}, rng);

  Tensor repeated = Tensor::empty({n, heads * width}, DType::f64);
  auto repeat_loss = [&] {
    ops::repeat_heads(repeated, x, heads);
    return dot(repeated, dout);
  };
  Tensor dx = Tensor::empty({n, width}, DType::f64);
  ops::sum_heads(dx, dout, heads);
  EXPECT_TRUE(gradient_matches("sum_heads", repeat_loss, x, dx));

  Tensor scaled = Tensor::empty({n, heads * width}, DType::f64);
  auto scale_loss = [&] {
    ops::scale_heads_forward(scaled, xh, s);
    return dot(scaled, dout);
  };
  Tensor dxh = Tensor::empty({n, heads * width}, DType::f64), ds = Tensor::empty({n, heads}, DType::f64);
  ops::scale_heads_backward(dxh, ds, dout, xh, s);
  EXPECT_TRUE(gradient_matches("scale_heads dx", scale_loss, xh, dxh));
  EXPECT_TRUE(gradient_matches("scale_heads ds", scale_loss, s, ds));

  const Tensor y0 = random_tensor({n, heads * width}, rng);
  Tensor y = Tensor::empty({n, heads * width}, DType::f64);
  auto skip_loss = [&] {
    y.copy_from(y0);
    ops::add_scaled_heads_forward(y, xh, D);
    return dot(y, dout);
  };
  Tensor dskip = Tensor::zeros({n, heads * width}, DType::f64), dD = Tensor::zeros({heads}, DType::f64);
  ops::add_scaled_heads_backward(dskip, dD, dout, xh, D);
  EXPECT_TRUE(gradient_matches("add_scaled_heads dx", skip_loss, xh, dskip));
  EXPECT_TRUE(gradient_matches("add_scaled_heads dD", skip_loss, D, dD));
}

TEST(LayerLowerBound, RisesWithDepthAndBackwardMatchesFiniteDifferences) {
  Rng rng(10);
  const int64_t layers = 5, width = 3;
  Tensor gamma = random_tensor({layers, width}, rng, -1, 1);
  Tensor lb = Tensor::empty({width}, DType::f64);
  double previous = -1;
  for (int64_t layer = 0; layer < layers; ++layer) {
    ops::layer_lower_bound_forward(lb, gamma, layer);
    EXPECT_GT(lb.data<double>()[1], previous);
    previous = lb.data<double>()[1];
  }
  ops::layer_lower_bound_forward(lb, gamma, 0);
  for (int64_t c = 0; c < width; ++c) EXPECT_EQ(lb.data<double>()[c], 0.0);
  // Γ = 0 (fla's init): p = 1/L, lb_ℓ = ℓ/L.
  const Tensor zero = Tensor::zeros({layers, width}, DType::f64);
  ops::layer_lower_bound_forward(lb, zero, 3);
  EXPECT_NEAR(lb.data<double>()[2], 3.0 / layers, 1e-15);
  const Tensor dlb = random_tensor({width}, rng);
  for (int64_t layer : {1, 3, 4}) {
    auto loss = [&] {
      ops::layer_lower_bound_forward(lb, gamma, layer);
      return dot(lb, dlb);
    };
    Tensor dgamma = Tensor::zeros({layers, width}, DType::f64);
    ops::layer_lower_bound_backward(dgamma, dlb, gamma, layer);
    EXPECT_TRUE(gradient_matches("dgamma layer " + std::to_string(layer), loss, gamma, dgamma));
  }
}

TEST(Lerp, BackwardMatchesFiniteDifferencesForSharedAndPerRowMu) {
  Rng rng(11);
  const int64_t n = 6, c = 4;
  Tensor x = random_tensor({n, c}, rng), delta = random_tensor({n, c}, rng);
  const Tensor dout = random_tensor({n, c}, rng);
  for (bool per_row : {false, true}) {
    Tensor mu = per_row ? random_tensor({n, c}, rng) : random_tensor({c}, rng);
    Tensor out = Tensor::empty({n, c}, DType::f64);
    auto loss = [&] {
      ops::lerp_forward(out, x, delta, mu);
      return dot(out, dout);
    };
    loss();
    const double m = mu.data<double>()[per_row ? 2 * c + 1 : 1];
    EXPECT_DOUBLE_EQ(out.data<double>()[2 * c + 1], x.data<double>()[2 * c + 1] + delta.data<double>()[2 * c + 1] * m);
    Tensor ddelta = Tensor::zeros({n, c}, DType::f64), dmu = Tensor::zeros(mu.shape(), DType::f64);
    ops::lerp_backward(ddelta, dmu, dout, delta, mu);
    EXPECT_TRUE(gradient_matches("ddelta", loss, delta, ddelta));
    EXPECT_TRUE(gradient_matches("dmu", loss, mu, dmu));
  }
}

TEST(Columns, SliceAndPlaceAreInverse) {
  Rng rng(12);
  const Tensor x = random_tensor({3, 7}, rng);
  Tensor block = Tensor::empty({3, 2}, DType::f64), back = Tensor::zeros({3, 7}, DType::f64);
  ops::column_slice(block, x, 4);
  ops::column_place(back, block, 4);
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t c = 0; c < 7; ++c) {
      EXPECT_EQ(back.data<double>()[r * 7 + c], c == 4 || c == 5 ? x.data<double>()[r * 7 + c] : 0.0);
    }
  }
  EXPECT_TRUE(testing::throws_invalid_argument([&] { ops::column_slice(block, x, 6); }, {"column_slice", "begin"}));
}

}  // namespace
}  // namespace linea
