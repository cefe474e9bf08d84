// RMSNorm, per-head L2 norm and the gated per-head output RMSNorm: hand cases, backward vs finite
// differences in f64, f32 vs f64, accumulation of dweight, determinism across thread counts, and
// argument errors.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "tests/testing/assert_close.h"
#include "tests/testing/kernel_test.h"

namespace linea {
namespace {

using testing::assert_close;
using testing::dot;
using testing::gradient_matches;
using testing::random_tensor;
using testing::throws_invalid_argument;
using testing::to_f32;
using testing::to_f64;
using testing::values;

// ---- RMSNorm -----------------------------------------------------------------------------------

TEST(RmsNorm, KnownVector) {
  // x = (3, 4): mean(x²) = 12.5, rstd = 1/sqrt(12.5); y = x · rstd · w with w = (1, 2).
  Tensor x = values({1, 2}, {3, 4}), w = values({2}, {1, 2});
  Tensor out = Tensor::empty({1, 2}, DType::f64), rstd = Tensor::empty({1}, DType::f64);
  ops::rmsnorm_forward(out, rstd, x, w, 0.0);
  const double r = 1 / std::sqrt(12.5);
  EXPECT_DOUBLE_EQ(rstd.data<double>()[0], r);
  EXPECT_DOUBLE_EQ(out.data<double>()[0], 3 * r);
  EXPECT_DOUBLE_EQ(out.data<double>()[1], 8 * r);
}

TEST(RmsNorm, BackwardMatchesFiniteDifferences) {
  Rng rng(1);
  const int64_t n = 5, d = 7;
  const double eps = 1e-5;
  Tensor x = random_tensor({n, d}, rng), w = random_tensor({d}, rng, 0.5, 1.5), dout = random_tensor({n, d}, rng);
  Tensor out = Tensor::empty({n, d}, DType::f64), rstd = Tensor::empty({n}, DType::f64);
  auto loss = [&] {
    ops::rmsnorm_forward(out, rstd, x, w, eps);
    return dot(out, dout);
  };
  loss();
  Tensor dx = Tensor::empty({n, d}, DType::f64), dw = Tensor::zeros({d}, DType::f64);
  ops::rmsnorm_backward(dx, dw, dout, x, w, rstd);
  EXPECT_TRUE(gradient_matches("dx", loss, x, dx));
  EXPECT_TRUE(gradient_matches("dweight", loss, w, dw));
}

TEST(RmsNorm, WeightGradientAccumulates) {
  Rng rng(2);
  const int64_t n = 4, d = 6;
  Tensor x = random_tensor({n, d}, rng), w = random_tensor({d}, rng), dout = random_tensor({n, d}, rng);
  Tensor out = Tensor::empty({n, d}, DType::f64), rstd = Tensor::empty({n}, DType::f64);
  ops::rmsnorm_forward(out, rstd, x, w, 1e-6);
  Tensor dx = Tensor::empty({n, d}, DType::f64), fresh = Tensor::zeros({d}, DType::f64);
  ops::rmsnorm_backward(dx, fresh, dout, x, w, rstd);
  Tensor acc = random_tensor({d}, rng), before = acc.clone();
  ops::rmsnorm_backward(dx, acc, dout, x, w, rstd);
  for (int64_t j = 0; j < d; ++j) {
    EXPECT_NEAR(acc.data<double>()[j], before.data<double>()[j] + fresh.data<double>()[j], 1e-14);
  }
}

TEST(RmsNorm, F32AgreesWithF64) {
  Rng rng(3);
  const int64_t n = 33, d = 64;
  Tensor x = random_tensor({n, d}, rng), w = random_tensor({d}, rng), dout = random_tensor({n, d}, rng);
  auto run = [&](DType dt, Tensor& out, Tensor& dx, Tensor& dw) {
    Tensor xc = dt == DType::f32 ? to_f32(x) : x, wc = dt == DType::f32 ? to_f32(w) : w;
    Tensor dc = dt == DType::f32 ? to_f32(dout) : dout;
    out = Tensor::empty({n, d}, dt);
    Tensor rstd = Tensor::empty({n}, dt);
    dx = Tensor::empty({n, d}, dt);
    dw = Tensor::zeros({d}, dt);
    ops::rmsnorm_forward(out, rstd, xc, wc, 1e-6);
    ops::rmsnorm_backward(dx, dw, dc, xc, wc, rstd);
  };
  Tensor o64, dx64, dw64, o32, dx32, dw32;
  run(DType::f64, o64, dx64, dw64);
  run(DType::f32, o32, dx32, dw32);
  EXPECT_TRUE(assert_close("out", o64, o32, 1e-6));
  EXPECT_TRUE(assert_close("dx", dx64, dx32, 1e-6));
  EXPECT_TRUE(assert_close("dweight", dw64, dw32, 1e-6));
}

TEST(RmsNorm, WeightGradientIsIndependentOfThreadCount) {
  Rng rng(4);
  const int64_t n = 1000, d = 48;  // several row blocks, enough work to run in parallel
  Tensor x = to_f32(random_tensor({n, d}, rng)), w = to_f32(random_tensor({d}, rng));
  Tensor dout = to_f32(random_tensor({n, d}, rng));
  Tensor out = Tensor::empty({n, d}, DType::f32), rstd = Tensor::empty({n}, DType::f32);
  ops::rmsnorm_forward(out, rstd, x, w, 1e-6);
  auto dweight_with = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    Tensor dx = Tensor::empty({n, d}, DType::f32), dw = Tensor::zeros({d}, DType::f32);
    ops::rmsnorm_backward(dx, dw, dout, x, w, rstd);
    omp_set_num_threads(saved);
    return dw;
  };
  Tensor one = dweight_with(1), three = dweight_with(3);
  EXPECT_EQ(std::memcmp(one.raw(), three.raw(), one.nbytes()), 0);
}

TEST(RmsNorm, RejectsBadArguments) {
  Tensor x = Tensor::zeros({3, 4}, DType::f32), out = Tensor::zeros({3, 4}, DType::f32);
  Tensor rstd = Tensor::zeros({3}, DType::f32);
  EXPECT_TRUE(throws_invalid_argument([&] { ops::rmsnorm_forward(out, rstd, x, Tensor::zeros({5}, DType::f32), 1e-6); },
                                      {"rmsnorm_forward", "weight", "[4]", "[5]"}));
  EXPECT_TRUE(throws_invalid_argument([&] { ops::rmsnorm_forward(out, rstd, x, Tensor::zeros({4}, DType::f64), 1e-6); },
                                      {"rmsnorm_forward", "weight", "f32"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { ops::rmsnorm_forward(out, Tensor::zeros({4}, DType::f32), x, Tensor::zeros({4}, DType::f32), 1e-6); },
      {"rstd", "[3]"}));
  EXPECT_TRUE(throws_invalid_argument([&] { ops::rmsnorm_forward(out, rstd, x, Tensor::zeros({4}, DType::f32), -1); },
                                      {"rmsnorm_forward", "eps"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { ops::rmsnorm_forward(out, rstd, Tensor::zeros({12}, DType::f32), Tensor::zeros({4}, DType::f32), 1e-6); },
      {"rmsnorm_forward", "x", "[*, *]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { ops::rmsnorm_forward(out, rstd, Tensor(), Tensor::zeros({4}, DType::f32), 1e-6); }, {"x", "undefined"}));
  EXPECT_TRUE(throws_invalid_argument([&] { ops::rmsnorm_forward(out, rstd, x, Tensor::zeros({4}, DType::i32), 1e-6); },
                                      {"weight", "f32 or f64"}));
  float fake = 0;
  Tensor on_gpu = Tensor::view(&fake, {4}, DType::f32, Device::cuda);
  EXPECT_TRUE(throws_invalid_argument([&] { ops::rmsnorm_forward(out, rstd, x, on_gpu, 1e-6); }, {"weight", "cpu"}));
}

#ifndef LINEA_WITH_CUDA  // a CUDA build runs these ops on the device (tests/gpu)
TEST(RmsNorm, CudaTensorsNeedACudaBuild) {
  float fake[12] = {};
  auto gpu = [&](const Shape& s) { return Tensor::view(fake, s, DType::f32, Device::cuda); };
  try {
    ops::rmsnorm_forward(gpu({3, 4}), gpu({3}), gpu({3, 4}), gpu({4}), 1e-6);
    ADD_FAILURE() << "no error for cuda tensors";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("rmsnorm_forward: not implemented on cuda yet"), std::string::npos);
  }
}
#endif

// ---- L2 norm per head --------------------------------------------------------------------------

TEST(L2Norm, KnownVectorPerHead) {
  // heads of (3, 4) and (0, 2): norms 5 and 2.
  Tensor x = values({1, 4}, {3, 4, 0, 2});
  Tensor out = Tensor::empty({1, 4}, DType::f64), rstd = Tensor::empty({1, 2}, DType::f64);
  ops::l2norm_forward(out, rstd, x, 2, 0.0);
  EXPECT_DOUBLE_EQ(out.data<double>()[0], 0.6);
  EXPECT_DOUBLE_EQ(out.data<double>()[1], 0.8);
  EXPECT_DOUBLE_EQ(out.data<double>()[2], 0.0);
  EXPECT_DOUBLE_EQ(out.data<double>()[3], 1.0);
  EXPECT_DOUBLE_EQ(rstd.data<double>()[0], 0.2);
  EXPECT_DOUBLE_EQ(rstd.data<double>()[1], 0.5);
}

TEST(L2Norm, BackwardMatchesFiniteDifferences) {
  Rng rng(5);
  const int64_t n = 4, heads = 3, dh = 5;
  Tensor x = random_tensor({n, heads * dh}, rng), dout = random_tensor({n, heads * dh}, rng);
  Tensor out = Tensor::empty({n, heads * dh}, DType::f64), rstd = Tensor::empty({n, heads}, DType::f64);
  auto loss = [&] {
    ops::l2norm_forward(out, rstd, x, heads, 1e-6);
    return dot(out, dout);
  };
  loss();
  Tensor dx = Tensor::empty({n, heads * dh}, DType::f64);
  ops::l2norm_backward(dx, dout, out, rstd, heads);
  EXPECT_TRUE(gradient_matches("dx", loss, x, dx));
}

TEST(L2Norm, F32AgreesWithF64) {
  Rng rng(6);
  const int64_t n = 20, heads = 4, dh = 32;
  Tensor x = random_tensor({n, heads * dh}, rng), dout = random_tensor({n, heads * dh}, rng);
  auto run = [&](DType dt, Tensor& out, Tensor& dx) {
    Tensor xc = dt == DType::f32 ? to_f32(x) : x, dc = dt == DType::f32 ? to_f32(dout) : dout;
    out = Tensor::empty(x.shape(), dt);
    dx = Tensor::empty(x.shape(), dt);
    Tensor rstd = Tensor::empty({n, heads}, dt);
    ops::l2norm_forward(out, rstd, xc, heads, 1e-6);
    ops::l2norm_backward(dx, dc, out, rstd, heads);
  };
  Tensor o64, dx64, o32, dx32;
  run(DType::f64, o64, dx64);
  run(DType::f32, o32, dx32);
  EXPECT_TRUE(assert_close("out", o64, o32, 1e-6));
  EXPECT_TRUE(assert_close("dx", dx64, dx32, 1e-6));
}

TEST(L2Norm, RejectsBadArguments) {
  Tensor x = Tensor::zeros({2, 6}, DType::f64), out = Tensor::zeros({2, 6}, DType::f64);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::l2norm_forward(out, Tensor::zeros({2, 2}, DType::f64), x, 4, 1e-6);
      },
      {"l2norm_forward", "x", "multiple of heads"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::l2norm_forward(out, Tensor::zeros({2, 2}, DType::f64), x, 3, 1e-6);
      },
      {"l2norm_forward", "rstd", "[2, 3]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::l2norm_forward(out, Tensor::zeros({2, 1}, DType::f64), x, 0, 1e-6);
      },
      {"l2norm_forward", "heads"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::l2norm_backward(Tensor::zeros({2, 5}, DType::f64), x, out, Tensor::zeros({2, 3}, DType::f64), 3);
      },
      {"l2norm_backward", "dx"}));
}

// ---- gated per-head RMSNorm --------------------------------------------------------------------

TEST(GatedRmsNorm, KnownCaseWithSigmoidGate) {
  // Two heads (3, 4) and (1, 1), γ = (1, 2), z = 0 → σ(0) = 1/2.
  Tensor o = values({1, 4}, {3, 4, 1, 1}), z = Tensor::zeros({1, 4}, DType::f64), w = values({2}, {1, 2});
  Tensor out = Tensor::empty({1, 4}, DType::f64), rstd = Tensor::empty({1, 2}, DType::f64);
  ops::gated_rmsnorm_forward(out, rstd, o, z, w, 2, ops::GateActivation::sigmoid, 0.0);
  const double r0 = 1 / std::sqrt(12.5), r1 = 1.0;
  EXPECT_DOUBLE_EQ(rstd.data<double>()[0], r0);
  EXPECT_DOUBLE_EQ(rstd.data<double>()[1], r1);
  EXPECT_DOUBLE_EQ(out.data<double>()[0], 3 * r0 * 0.5);
  EXPECT_DOUBLE_EQ(out.data<double>()[1], 4 * r0 * 2 * 0.5);
  EXPECT_DOUBLE_EQ(out.data<double>()[2], 0.5);
  EXPECT_DOUBLE_EQ(out.data<double>()[3], 1.0);
}

TEST(GatedRmsNorm, OneHeadWithoutGateIsRmsNorm) {
  Rng rng(7);
  const int64_t n = 6, d = 10;
  Tensor x = random_tensor({n, d}, rng), w = random_tensor({d}, rng), dout = random_tensor({n, d}, rng);
  Tensor out_a = Tensor::empty({n, d}, DType::f64), rstd_a = Tensor::empty({n}, DType::f64);
  Tensor out_b = Tensor::empty({n, d}, DType::f64), rstd_b = Tensor::empty({n, 1}, DType::f64);
  ops::rmsnorm_forward(out_a, rstd_a, x, w, 1e-6);
  ops::gated_rmsnorm_forward(out_b, rstd_b, x, Tensor(), w, 1, ops::GateActivation::none, 1e-6);
  EXPECT_TRUE(assert_close("out", out_a, out_b, 0, 0));
  Tensor dx_a = Tensor::empty({n, d}, DType::f64), dw_a = Tensor::zeros({d}, DType::f64);
  Tensor dx_b = Tensor::empty({n, d}, DType::f64), dw_b = Tensor::zeros({d}, DType::f64);
  ops::rmsnorm_backward(dx_a, dw_a, dout, x, w, rstd_a);
  ops::gated_rmsnorm_backward(dx_b, Tensor(), dw_b, dout, x, Tensor(), w, rstd_b, 1, ops::GateActivation::none);
  EXPECT_TRUE(assert_close("dx", dx_a, dx_b, 0, 0));
  EXPECT_TRUE(assert_close("dweight", dw_a, dw_b, 0, 0));
}

// The fused residual add of the forward: add_inplace then rmsnorm_forward, bit for bit (f32 and
// f64), into a separate sum and over either input (h += x in place, as Block's forward uses it).
TEST(RmsNorm, ForwardResidualIsAddThenForward) {
  for (DType dt : {DType::f32, DType::f64}) {
    Rng rng(22);
    const int64_t n = 300, d = 37;
    const Tensor x = testing::as_dtype(random_tensor({n, d}, rng, -2, 2), dt);
    const Tensor residual = testing::as_dtype(random_tensor({n, d}, rng, -2, 2), dt);
    const Tensor w = testing::as_dtype(random_tensor({d}, rng, 0.5, 1.5), dt);
    Tensor sum = x.clone(), out = Tensor::empty({n, d}, dt), rstd = Tensor::empty({n}, dt);
    ops::add_inplace(sum, residual);
    ops::rmsnorm_forward(out, rstd, sum, w, 1e-6);
    const testing::NamedTensors expected = {{"sum", sum}, {"out", out}, {"rstd", rstd}};
    for (int where = 0; where < 3; ++where) {  // sum separate, over x, over residual
      Tensor fx = x.clone(), fr = residual.clone();
      Tensor fsum = where == 0 ? Tensor::empty({n, d}, dt) : where == 1 ? fx : fr;
      Tensor fout = Tensor::empty({n, d}, dt), frstd = Tensor::empty({n}, dt);
      ops::rmsnorm_forward_residual(fout, frstd, fsum, fx, fr, w, 1e-6);
      testing::expect_same_bits(expected, {{"sum", fsum}, {"out", fout}, {"rstd", frstd}},
                                "sum " + std::to_string(where) + " " + std::string(dtype_name(dt)));
    }
  }
  const Tensor t = Tensor::zeros({3, 4}, DType::f32), w = Tensor::zeros({4}, DType::f32);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::rmsnorm_forward_residual(t, Tensor::zeros({3}, DType::f32), t, t, Tensor::zeros({3, 5}, DType::f32), w,
                                      1e-6);
      },
      {"rmsnorm_forward_residual", "residual", "[3, 4]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { ops::rmsnorm_forward_residual(t, Tensor::zeros({3}, DType::f32), Tensor(), t, t, w, 1e-6); },
      {"rmsnorm_forward_residual", "sum", "undefined"}));
}

// The fused residual add: rmsnorm_backward then add_inplace(dx, residual), bit for bit (f32 and
// f64, several row blocks), into a separate dx and over the residual itself (dx += the norm's
// gradient, as Block's backward uses it).
TEST(RmsNorm, BackwardResidualIsBackwardThenAdd) {
  for (DType dt : {DType::f32, DType::f64}) {
    Rng rng(21);
    const int64_t n = 300, d = 37;
    const Tensor x = testing::as_dtype(random_tensor({n, d}, rng, -2, 2), dt);
    const Tensor w = testing::as_dtype(random_tensor({d}, rng, 0.5, 1.5), dt);
    const Tensor dout = testing::as_dtype(random_tensor({n, d}, rng), dt);
    const Tensor residual = testing::as_dtype(random_tensor({n, d}, rng), dt);
    const Tensor dw0 = testing::as_dtype(random_tensor({d}, rng), dt);
    Tensor out = Tensor::empty({n, d}, dt), rstd = Tensor::empty({n}, dt);
    ops::rmsnorm_forward(out, rstd, x, w, 1e-6);

    Tensor dx = Tensor::empty({n, d}, dt), dw = dw0.clone();
    ops::rmsnorm_backward(dx, dw, dout, x, w, rstd);
    ops::add_inplace(dx, residual);

    Tensor fused_dx = Tensor::empty({n, d}, dt), fused_dw = dw0.clone();
    ops::rmsnorm_backward_residual(fused_dx, fused_dw, dout, x, w, rstd, residual);
    Tensor in_place = residual.clone(), in_place_dw = dw0.clone();
    ops::rmsnorm_backward_residual(in_place, in_place_dw, dout, x, w, rstd, in_place);
    testing::expect_same_bits({{"dx", dx}, {"dweight", dw}}, {{"dx", fused_dx}, {"dweight", fused_dw}},
                              "separate " + std::string(dtype_name(dt)));
    testing::expect_same_bits({{"dx", dx}, {"dweight", dw}}, {{"dx", in_place}, {"dweight", in_place_dw}},
                              "in place " + std::string(dtype_name(dt)));
  }
  const Tensor t = Tensor::zeros({3, 4}, DType::f32), r = Tensor::zeros({3}, DType::f32);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::rmsnorm_backward_residual(t, Tensor::zeros({4}, DType::f32), t, t, Tensor::zeros({4}, DType::f32), r,
                                       Tensor::zeros({3, 5}, DType::f32));
      },
      {"rmsnorm_backward_residual", "residual", "[3, 4]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::rmsnorm_backward_residual(t, Tensor::zeros({4}, DType::f32), t, t, Tensor::zeros({4}, DType::f32), r,
                                       Tensor());
      },
      {"rmsnorm_backward_residual", "residual", "undefined"}));
}

class GatedRmsNormByActivation : public ::testing::TestWithParam<ops::GateActivation> {};

// The backward that recomputes the forward: gated_rmsnorm_forward then gated_rmsnorm_backward, bit
// for bit (f32 and f64, several row blocks and heads).
TEST_P(GatedRmsNormByActivation, BackwardRecomputeIsForwardThenBackward) {
  const ops::GateActivation act = GetParam();
  const bool gated = act != ops::GateActivation::none;
  for (DType dt : {DType::f32, DType::f64}) {
    Rng rng(23);
    const int64_t n = 200, heads = 3, dv = 19;
    const Shape s{n, heads * dv};
    const Tensor o = testing::as_dtype(random_tensor(s, rng, -2, 2), dt),
                 z = testing::as_dtype(random_tensor(s, rng, -3, 3), dt);
    const Tensor w = testing::as_dtype(random_tensor({dv}, rng, 0.5, 1.5), dt);
    const Tensor dout = testing::as_dtype(random_tensor(s, rng), dt),
                 dw0 = testing::as_dtype(random_tensor({dv}, rng), dt);
    const Tensor gate = gated ? z : Tensor();
    Tensor out = Tensor::empty(s, dt), rstd = Tensor::empty({n, heads}, dt);
    Tensor d_o = Tensor::empty(s, dt), dz = gated ? Tensor::empty(s, dt) : Tensor(), dw = dw0.clone();
    ops::gated_rmsnorm_forward(out, rstd, o, gate, w, heads, act, 1e-5);
    ops::gated_rmsnorm_backward(d_o, dz, dw, dout, o, gate, w, rstd, heads, act);
    Tensor f_out = Tensor::empty(s, dt), f_do = Tensor::empty(s, dt), f_dz = gated ? Tensor::empty(s, dt) : Tensor();
    Tensor f_dw = dw0.clone();
    ops::gated_rmsnorm_backward_recompute(f_do, f_dz, f_dw, f_out, dout, o, gate, w, heads, act, 1e-5);
    testing::NamedTensors expected = {{"out", out}, {"d_o", d_o}, {"dweight", dw}};
    testing::NamedTensors got = {{"out", f_out}, {"d_o", f_do}, {"dweight", f_dw}};
    if (gated) {
      expected.push_back({"dz", dz});
      got.push_back({"dz", f_dz});
    }
    testing::expect_same_bits(expected, got, std::string(dtype_name(dt)));
  }
  const Tensor t = Tensor::zeros({3, 8}, DType::f32), w4 = Tensor::zeros({4}, DType::f32);
  EXPECT_TRUE(throws_invalid_argument(
      [&] { ops::gated_rmsnorm_backward_recompute(t, t, w4, Tensor(), t, t, t, w4, 2, act, 1e-6); },
      {"gated_rmsnorm_backward_recompute", "out", "undefined"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { ops::gated_rmsnorm_backward_recompute(t, t, w4, t, t, t, t, w4, 2, act, -1); },
                              {"gated_rmsnorm_backward_recompute", "eps"}));
}

TEST_P(GatedRmsNormByActivation, BackwardMatchesFiniteDifferences) {
  const ops::GateActivation act = GetParam();
  const bool gated = act != ops::GateActivation::none;
  Rng rng(8);
  const int64_t n = 4, heads = 3, dv = 5, width = heads * dv;
  Tensor o = random_tensor({n, width}, rng), z = random_tensor({n, width}, rng, -3, 3);
  Tensor w = random_tensor({dv}, rng, 0.5, 1.5), dout = random_tensor({n, width}, rng);
  Tensor out = Tensor::empty({n, width}, DType::f64), rstd = Tensor::empty({n, heads}, DType::f64);
  auto loss = [&] {
    ops::gated_rmsnorm_forward(out, rstd, o, gated ? z : Tensor(), w, heads, act, 1e-5);
    return dot(out, dout);
  };
  loss();
  Tensor d_o = Tensor::empty({n, width}, DType::f64), dz = Tensor::empty({n, width}, DType::f64);
  Tensor dw = Tensor::zeros({dv}, DType::f64);
  ops::gated_rmsnorm_backward(d_o, gated ? dz : Tensor(), dw, dout, o, gated ? z : Tensor(), w, rstd, heads, act);
  EXPECT_TRUE(gradient_matches("do", loss, o, d_o));
  EXPECT_TRUE(gradient_matches("dweight", loss, w, dw));
  if (gated) {
    EXPECT_TRUE(gradient_matches("dz", loss, z, dz));
  }
}

TEST_P(GatedRmsNormByActivation, F32AgreesWithF64AndWeightGradientAccumulates) {
  const ops::GateActivation act = GetParam();
  const bool gated = act != ops::GateActivation::none;
  Rng rng(9);
  const int64_t n = 300, heads = 2, dv = 16, width = heads * dv;
  Tensor o = random_tensor({n, width}, rng), z = random_tensor({n, width}, rng, -3, 3);
  Tensor w = random_tensor({dv}, rng), dout = random_tensor({n, width}, rng), dw_start = random_tensor({dv}, rng);
  struct Result {
    Tensor out, d_o, dz, dw;
  };
  auto run = [&](DType dt, const Tensor& dw_initial) {
    auto cast = [&](const Tensor& t) { return dt == DType::f32 ? to_f32(t) : t.clone(); };
    Tensor oc = cast(o), zc = gated ? cast(z) : Tensor(), wc = cast(w), dc = cast(dout);
    Result r{Tensor::empty(o.shape(), dt), Tensor::empty(o.shape(), dt),
             gated ? Tensor::empty(o.shape(), dt) : Tensor(), cast(dw_initial)};
    Tensor rstd = Tensor::empty({n, heads}, dt);
    ops::gated_rmsnorm_forward(r.out, rstd, oc, zc, wc, heads, act, 1e-6);
    ops::gated_rmsnorm_backward(r.d_o, r.dz, r.dw, dc, oc, zc, wc, rstd, heads, act);
    return r;
  };
  const Tensor zero_dw = Tensor::zeros({dv}, DType::f64);
  const Result r64 = run(DType::f64, zero_dw), r32 = run(DType::f32, zero_dw);
  EXPECT_TRUE(assert_close("out", r64.out, r32.out, 1e-6));
  EXPECT_TRUE(assert_close("do", r64.d_o, r32.d_o, 1e-6));
  EXPECT_TRUE(assert_close("dweight", r64.dw, r32.dw, 1e-6));
  if (gated) {
    EXPECT_TRUE(assert_close("dz", r64.dz, r32.dz, 1e-6));
  }
  const Result acc = run(DType::f64, dw_start);
  for (int64_t j = 0; j < dv; ++j) {
    EXPECT_NEAR(acc.dw.data<double>()[j], dw_start.data<double>()[j] + r64.dw.data<double>()[j], 1e-12);
  }
}

INSTANTIATE_TEST_SUITE_P(Activations, GatedRmsNormByActivation,
                         ::testing::Values(ops::GateActivation::none, ops::GateActivation::silu,
                                           ops::GateActivation::sigmoid),
                         [](const auto& info) {
                           switch (info.param) {
                             case ops::GateActivation::silu: return std::string("silu");
                             case ops::GateActivation::sigmoid: return std::string("sigmoid");
                             case ops::GateActivation::none: break;
                           }
                           return std::string("none");
                         });

TEST(GatedRmsNorm, RejectsBadArguments) {
  Tensor o = Tensor::zeros({2, 8}, DType::f32), out = Tensor::zeros({2, 8}, DType::f32);
  Tensor rstd = Tensor::zeros({2, 2}, DType::f32), w = Tensor::zeros({4}, DType::f32);
  EXPECT_TRUE(throws_invalid_argument(
      [&] { ops::gated_rmsnorm_forward(out, rstd, o, Tensor(), w, 2, ops::GateActivation::silu, 1e-6); },
      {"gated_rmsnorm_forward", "z", "undefined"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::gated_rmsnorm_forward(out, rstd, o, o, Tensor::zeros({8}, DType::f32), 2, ops::GateActivation::silu, 1e-6);
      },
      {"gated_rmsnorm_forward", "weight", "[4]"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { ops::gated_rmsnorm_forward(out, rstd, o, o, w, 3, ops::GateActivation::silu, 1e-6); },
      {"gated_rmsnorm_forward", "o", "multiple of heads"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        ops::gated_rmsnorm_backward(Tensor::zeros({2, 8}, DType::f32), Tensor(), Tensor::zeros({4}, DType::f32), o, o,
                                    o, w, rstd, 2, ops::GateActivation::sigmoid);
      },
      {"gated_rmsnorm_backward", "dz", "undefined"}));
}

}  // namespace
}  // namespace linea
