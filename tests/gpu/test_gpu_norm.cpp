// CUDA normalisations against the CPU reference (f64 on the same inputs), in f32 and bf16: RMSNorm,
// per-head L2 norm and the gated per-head RMSNorm (none, silu, sigmoid), forward and backward, with
// dweight accumulated onto a nonzero start, rstd kept in f32, and a repeatable dweight.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/ops.h"
#include "tests/gpu/gpu_test.h"

namespace linea {
namespace {

using testing::assert_close;
using testing::kStatistics;
using testing::random_values;
using testing::to_device;
using testing::to_host;
using testing::tolerance;
using ops::GateActivation;

class GpuNorm : public testing::GpuDtypeTest {};

TEST_P(GpuNorm, RmsNorm) {
  const DType dt = GetParam();
  Rng rng(1);
  const double eps = 1e-6;
  for (auto [n, d] : std::vector<std::pair<int64_t, int64_t>>{{1, 4}, {5, 33}, {130, 256}, {300, 1024}}) {
    const Tensor x = random_values({n, d}, dt, rng, -2, 2), w = random_values({d}, dt, rng, 0.5, 1.5);
    const Tensor dout = random_values({n, d}, dt, rng), dw0 = random_values({d}, dt, rng);
    Tensor out = Tensor::empty({n, d}, DType::f64), rstd = Tensor::empty({n}, DType::f64);
    Tensor dx = Tensor::empty({n, d}, DType::f64), dw = dw0.clone();
    ops::rmsnorm_forward(out, rstd, x, w, eps);
    ops::rmsnorm_backward(dx, dw, dout, x, w, rstd);

    Tensor gx = to_device(x, dt), gw = to_device(w, dt), gdw = to_device(dw0, dt);
    Tensor gout = Tensor::empty({n, d}, dt, Device::cuda), grstd = Tensor::empty({n}, kStatistics, Device::cuda);
    Tensor gdx = Tensor::empty({n, d}, dt, Device::cuda);
    ops::rmsnorm_forward(gout, grstd, gx, gw, eps);
    ops::rmsnorm_backward(gdx, gdw, to_device(dout, dt), gx, gw, grstd);
    EXPECT_TRUE(assert_close("out", out, to_host(gout), tolerance(dt)));
    EXPECT_TRUE(assert_close("rstd", rstd, to_host(grstd), 1e-5));
    EXPECT_TRUE(assert_close("dx", dx, to_host(gdx), tolerance(dt)));
    EXPECT_TRUE(assert_close("dweight", dw, to_host(gdw), tolerance(dt)));
  }
}

TEST_P(GpuNorm, L2Norm) {
  const DType dt = GetParam();
  Rng rng(2);
  struct Case {
    int64_t n, heads, dh;
  };
  for (const Case c : {Case{1, 1, 3}, Case{7, 2, 16}, Case{200, 4, 128}, Case{64, 3, 257}}) {
    const Shape s{c.n, c.heads * c.dh};
    const Tensor x = random_values(s, dt, rng), dout = random_values(s, dt, rng);
    Tensor out = Tensor::empty(s, DType::f64), rstd = Tensor::empty({c.n, c.heads}, DType::f64);
    Tensor dx = Tensor::empty(s, DType::f64);
    ops::l2norm_forward(out, rstd, x, c.heads, 1e-6);
    // The backward reads the output as the device stores it.
    const Tensor out_stored = testing::representable(out, dt);
    ops::l2norm_backward(dx, dout, out_stored, rstd, c.heads);

    Tensor gout = Tensor::empty(s, dt, Device::cuda), grstd = Tensor::empty({c.n, c.heads}, kStatistics, Device::cuda);
    Tensor gdx = Tensor::empty(s, dt, Device::cuda);
    ops::l2norm_forward(gout, grstd, to_device(x, dt), c.heads, 1e-6);
    ops::l2norm_backward(gdx, to_device(dout, dt), to_device(out_stored, dt), grstd, c.heads);
    EXPECT_TRUE(assert_close("out", out, to_host(gout), tolerance(dt)));
    EXPECT_TRUE(assert_close("rstd", rstd, to_host(grstd), 1e-5));
    EXPECT_TRUE(assert_close("dx", dx, to_host(gdx), tolerance(dt)));
  }
}

TEST_P(GpuNorm, GatedRmsNorm) {
  const DType dt = GetParam();
  Rng rng(3);
  struct Case {
    int64_t n, heads, dv;
  };
  for (GateActivation act : {GateActivation::none, GateActivation::silu, GateActivation::sigmoid}) {
    for (const Case c : {Case{1, 1, 5}, Case{9, 2, 64}, Case{150, 4, 128}}) {
      const Shape s{c.n, c.heads * c.dv};
      const Tensor o = random_values(s, dt, rng), z = random_values(s, dt, rng, -3, 3),
                   dout = random_values(s, dt, rng);
      const Tensor w = random_values({c.dv}, dt, rng, 0.5, 1.5), dw0 = random_values({c.dv}, dt, rng);
      Tensor out = Tensor::empty(s, DType::f64), rstd = Tensor::empty({c.n, c.heads}, DType::f64);
      Tensor d_o = Tensor::empty(s, DType::f64), dz = Tensor::empty(s, DType::f64), dw = dw0.clone();
      ops::gated_rmsnorm_forward(out, rstd, o, z, w, c.heads, act, 1e-5);
      ops::gated_rmsnorm_backward(d_o, dz, dw, dout, o, z, w, rstd, c.heads, act);

      Tensor go = to_device(o, dt), gz = to_device(z, dt), gw = to_device(w, dt), gdw = to_device(dw0, dt);
      Tensor gout = Tensor::empty(s, dt, Device::cuda),
             grstd = Tensor::empty({c.n, c.heads}, kStatistics, Device::cuda);
      Tensor gdo = Tensor::empty(s, dt, Device::cuda), gdz = Tensor::empty(s, dt, Device::cuda);
      ops::gated_rmsnorm_forward(gout, grstd, go, gz, gw, c.heads, act, 1e-5);
      ops::gated_rmsnorm_backward(gdo, gdz, gdw, to_device(dout, dt), go, gz, gw, grstd, c.heads, act);
      EXPECT_TRUE(assert_close("out", out, to_host(gout), tolerance(dt)));
      EXPECT_TRUE(assert_close("rstd", rstd, to_host(grstd), 1e-5));
      EXPECT_TRUE(assert_close("do", d_o, to_host(gdo), tolerance(dt)));
      EXPECT_TRUE(assert_close("dweight", dw, to_host(gdw), tolerance(dt)));
      if (act != GateActivation::none) {
        EXPECT_TRUE(assert_close("dz", dz, to_host(gdz), tolerance(dt)));
      }
    }
  }
}

TEST_P(GpuNorm, WeightGradientIsRepeatable) {
  const DType dt = GetParam();
  Rng rng(4);
  const int64_t n = 5000, d = 512;
  Tensor x = to_device(random_values({n, d}, dt, rng), dt), w = to_device(random_values({d}, dt, rng), dt);
  Tensor dout = to_device(random_values({n, d}, dt, rng), dt);
  Tensor out = Tensor::empty({n, d}, dt, Device::cuda), rstd = Tensor::empty({n}, kStatistics, Device::cuda);
  ops::rmsnorm_forward(out, rstd, x, w, 1e-6);
  auto dweight = [&] {
    Tensor dx = Tensor::empty({n, d}, dt, Device::cuda), dw = Tensor::zeros({d}, dt, Device::cuda);
    ops::rmsnorm_backward(dx, dw, dout, x, w, rstd);
    return dw.clone();
  };
  const Tensor first = dweight(), second = dweight();
  EXPECT_EQ(0, std::memcmp(first.raw(), second.raw(), first.nbytes()));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuNorm, ::testing::Values(DType::f32, DType::bf16), testing::dtype_test_name);

}  // namespace
}  // namespace linea
