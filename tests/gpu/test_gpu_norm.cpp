// CUDA normalisations against the CPU reference (f64 on the same inputs), in f32 and bf16: RMSNorm,
// per-head L2 norm and the gated per-head RMSNorm (none, silu, sigmoid), forward and backward, with
// dweight accumulated onto a nonzero start and rstd kept in f32. The gated norm's shapes cover
// every path of kernels/cuda/gated_rmsnorm.cu: several groups per warp (widths 5, 8, 64, 128), one
// group per warp in registers (33, 100, 256, 512, 1024, 2048), groups read twice (301, 2056, 3000,
// 4096), 16-byte packs and single channels (odd widths), group counts that leave the last block
// short and blocks of several steps (4099 × 256, 8201 × 2 × 64). Also: d_o or dz aliasing dout
// gives the same bits as separate outputs, and dweight is the same bit for bit on a second run.
// The fused residual adds, against the CPU's unfused pairs: rmsnorm_forward_residual (sum = x + r,
// then its norm) and rmsnorm_backward_residual (the residual stream's gradient added in the norm's
// backward), each into a separate tensor and over an input; gated_rmsnorm_backward_recompute (the
// forward recomputed in the backward's pass) against the CPU's forward then backward.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/ops.h"
#include "tests/gpu/gpu_test.h"

namespace linea {
namespace {

using ops::GateActivation;
using testing::assert_close;
using testing::kStatistics;
using testing::random_values;
using testing::to_device;
using testing::to_host;
using testing::tolerance;

class GpuNorm : public testing::GpuDtypeTest {};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST_P(GpuNorm, RmsNorm) {
  const DType dt = GetParam();
  Rng rng(1);
  const double eps = 1e-6;
  for (auto [n, d] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 4}, {5, 33}, {130, 256}, {300, 1024}, {20, 2048}, {9, 4096}}) {
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

// rmsnorm_forward_residual against the CPU reference of the unfused pair (add_inplace, then
// rmsnorm_forward, on the sum as the device stores it), in registers and read twice; the sum over
// an input gives the same bits as into a separate tensor.
TEST_P(GpuNorm, RmsNormForwardResidual) {
  const DType dt = GetParam();
  Rng rng(7);
  for (auto [n, d] : std::vector<std::pair<int64_t, int64_t>>{{5, 33}, {300, 1024}, {4099, 256}, {9, 4096}}) {
    SCOPED_TRACE("n " + std::to_string(n) + " d " + std::to_string(d));
    const Tensor x = random_values({n, d}, dt, rng, -2, 2), residual = random_values({n, d}, dt, rng, -2, 2);
    const Tensor w = random_values({d}, dt, rng, 0.5, 1.5);
    Tensor sum = x.clone();
    ops::add_inplace(sum, residual);
    sum = testing::representable(sum, dt);
    Tensor out = Tensor::empty({n, d}, DType::f64), rstd = Tensor::empty({n}, DType::f64);
    ops::rmsnorm_forward(out, rstd, sum, w, 1e-6);

    Tensor gx = to_device(x, dt), gr = to_device(residual, dt), gw = to_device(w, dt);
    Tensor gout = Tensor::empty({n, d}, dt, Device::cuda), grstd = Tensor::empty({n}, kStatistics, Device::cuda);
    Tensor gsum = Tensor::empty({n, d}, dt, Device::cuda);
    ops::rmsnorm_forward_residual(gout, grstd, gsum, gx, gr, gw, 1e-6);
    EXPECT_TRUE(assert_close("sum", sum, to_host(gsum), tolerance(dt)));
    EXPECT_TRUE(assert_close("out", out, to_host(gout), tolerance(dt)));
    EXPECT_TRUE(assert_close("rstd", rstd, to_host(grstd), 1e-5));
    Tensor in_place_out = Tensor::empty({n, d}, dt, Device::cuda);
    Tensor in_place_rstd = Tensor::empty({n}, kStatistics, Device::cuda);
    ops::rmsnorm_forward_residual(in_place_out, in_place_rstd, gx, gx, gr, gw, 1e-6);
    EXPECT_TRUE(same_bits(to_host(gsum), to_host(gx)));
    EXPECT_TRUE(same_bits(to_host(gout), to_host(in_place_out)));
    EXPECT_TRUE(same_bits(to_host(grstd), to_host(in_place_rstd)));
  }
}

// rmsnorm_backward_residual against the CPU reference of the unfused pair (rmsnorm_backward, then
// the residual added), into a separate dx and over the residual itself, in registers and read twice.
TEST_P(GpuNorm, RmsNormBackwardResidual) {
  const DType dt = GetParam();
  Rng rng(6);
  for (auto [n, d] : std::vector<std::pair<int64_t, int64_t>>{{5, 33}, {300, 1024}, {4099, 256}, {9, 4096}}) {
    SCOPED_TRACE("n " + std::to_string(n) + " d " + std::to_string(d));
    const Tensor x = random_values({n, d}, dt, rng, -2, 2), w = random_values({d}, dt, rng, 0.5, 1.5);
    const Tensor dout = random_values({n, d}, dt, rng), residual = random_values({n, d}, dt, rng);
    const Tensor dw0 = random_values({d}, dt, rng);
    Tensor out = Tensor::empty({n, d}, DType::f64), rstd = Tensor::empty({n}, DType::f64);
    Tensor dx = Tensor::empty({n, d}, DType::f64), dw = dw0.clone();
    ops::rmsnorm_forward(out, rstd, x, w, 1e-6);
    ops::rmsnorm_backward(dx, dw, dout, x, w, rstd);
    ops::add_inplace(dx, residual);

    Tensor gx = to_device(x, dt), gw = to_device(w, dt), gdout = to_device(dout, dt);
    Tensor gout = Tensor::empty({n, d}, dt, Device::cuda), grstd = Tensor::empty({n}, kStatistics, Device::cuda);
    ops::rmsnorm_forward(gout, grstd, gx, gw, 1e-6);
    Tensor gdx = Tensor::empty({n, d}, dt, Device::cuda), gdw = to_device(dw0, dt);
    ops::rmsnorm_backward_residual(gdx, gdw, gdout, gx, gw, grstd, to_device(residual, dt));
    Tensor in_place = to_device(residual, dt), in_place_dw = to_device(dw0, dt);
    ops::rmsnorm_backward_residual(in_place, in_place_dw, gdout, gx, gw, grstd, in_place);
    EXPECT_TRUE(assert_close("dx", dx, to_host(gdx), tolerance(dt)));
    EXPECT_TRUE(assert_close("dweight", dw, to_host(gdw), tolerance(dt)));
    EXPECT_TRUE(same_bits(to_host(gdx), to_host(in_place)));
    EXPECT_TRUE(same_bits(to_host(gdw), to_host(in_place_dw)));
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

struct GatedCase {
  int64_t n, heads, dv;
};

// The gated norm's inputs, and its device outputs for them.
struct GatedRun {
  Tensor o, z, dout, w, dw0;
  Tensor out, rstd, d_o, dz, dw;
};

// Where the device backward writes: into separate tensors, or d_o or dz into dout's storage.
enum class Alias { none, d_o, dz };

GatedRun gated_inputs(const GatedCase& c, DType dt, Rng& rng) {
  const Shape s{c.n, c.heads * c.dv};
  GatedRun r;
  r.o = random_values(s, dt, rng), r.z = random_values(s, dt, rng, -3, 3), r.dout = random_values(s, dt, rng);
  r.w = random_values({c.dv}, dt, rng, 0.5, 1.5), r.dw0 = random_values({c.dv}, dt, rng);
  return r;
}

// Runs the device forward and backward on r's inputs into r's outputs (as f64 on the host).
void run_gated_device(GatedRun& r, const GatedCase& c, DType dt, GateActivation act, Alias alias) {
  const Shape s = r.o.shape();
  Tensor go = to_device(r.o, dt), gz = to_device(r.z, dt), gw = to_device(r.w, dt), gdw = to_device(r.dw0, dt);
  Tensor gout = Tensor::empty(s, dt, Device::cuda), grstd = Tensor::empty({c.n, c.heads}, kStatistics, Device::cuda);
  Tensor gdout = to_device(r.dout, dt);
  Tensor gdo = alias == Alias::d_o ? gdout : Tensor::empty(s, dt, Device::cuda);
  Tensor gdz = alias == Alias::dz ? gdout : Tensor::empty(s, dt, Device::cuda);
  ops::gated_rmsnorm_forward(gout, grstd, go, gz, gw, c.heads, act, 1e-5);
  ops::gated_rmsnorm_backward(gdo, gdz, gdw, gdout, go, gz, gw, grstd, c.heads, act);
  r.out = to_host(gout), r.rstd = to_host(grstd), r.d_o = to_host(gdo), r.dz = to_host(gdz), r.dw = to_host(gdw);
}

TEST_P(GpuNorm, GatedRmsNorm) {
  const DType dt = GetParam();
  Rng rng(3);
  const std::vector<GatedCase> cases = {{1, 1, 5},     {9, 2, 64},    {150, 4, 128},  {37, 3, 8},
                                        {33, 2, 33},   {40, 2, 100},  {61, 3, 256},   {45, 1, 512},
                                        {11, 1, 1024}, {13, 2, 2048}, {6, 1, 301},    {7, 2, 2056},
                                        {5, 1, 3000},  {3, 2, 4096},  {4099, 1, 256}, {8201, 2, 64}};
  for (GateActivation act : {GateActivation::none, GateActivation::silu, GateActivation::sigmoid}) {
    for (const GatedCase& c : cases) {
      SCOPED_TRACE("n " + std::to_string(c.n) + " heads " + std::to_string(c.heads) + " dv " + std::to_string(c.dv) +
                   " act " + std::to_string(static_cast<int>(act)));
      GatedRun r = gated_inputs(c, dt, rng);
      const Shape s = r.o.shape();
      Tensor out = Tensor::empty(s, DType::f64), rstd = Tensor::empty({c.n, c.heads}, DType::f64);
      Tensor d_o = Tensor::empty(s, DType::f64), dz = Tensor::empty(s, DType::f64), dw = r.dw0.clone();
      ops::gated_rmsnorm_forward(out, rstd, r.o, r.z, r.w, c.heads, act, 1e-5);
      ops::gated_rmsnorm_backward(d_o, dz, dw, r.dout, r.o, r.z, r.w, rstd, c.heads, act);

      run_gated_device(r, c, dt, act, Alias::none);
      EXPECT_TRUE(assert_close("out", out, r.out, tolerance(dt)));
      EXPECT_TRUE(assert_close("rstd", rstd, r.rstd, 1e-5));
      EXPECT_TRUE(assert_close("do", d_o, r.d_o, tolerance(dt)));
      EXPECT_TRUE(assert_close("dweight", dw, r.dw, tolerance(dt)));
      if (act != GateActivation::none) {
        EXPECT_TRUE(assert_close("dz", dz, r.dz, tolerance(dt)));
      }
    }
  }
}

// gated_rmsnorm_backward_recompute against the CPU's forward then backward (f64), in registers and
// read twice, with and without a gate.
TEST_P(GpuNorm, GatedRmsNormBackwardRecompute) {
  const DType dt = GetParam();
  Rng rng(8);
  const std::vector<GatedCase> cases = {{1, 1, 5},     {9, 2, 64},    {150, 4, 128}, {33, 2, 33},    {45, 1, 512},
                                        {11, 1, 1024}, {13, 2, 2048}, {7, 2, 2056},  {4099, 1, 256}, {8201, 2, 64}};
  for (GateActivation act : {GateActivation::none, GateActivation::silu, GateActivation::sigmoid}) {
    for (const GatedCase& c : cases) {
      SCOPED_TRACE("n " + std::to_string(c.n) + " heads " + std::to_string(c.heads) + " dv " + std::to_string(c.dv) +
                   " act " + std::to_string(static_cast<int>(act)));
      const bool gated = act != GateActivation::none;
      GatedRun r = gated_inputs(c, dt, rng);
      const Shape s = r.o.shape();
      const Tensor gate = gated ? r.z : Tensor();
      Tensor out = Tensor::empty(s, DType::f64), rstd = Tensor::empty({c.n, c.heads}, DType::f64);
      Tensor d_o = Tensor::empty(s, DType::f64), dz = Tensor::empty(s, DType::f64), dw = r.dw0.clone();
      ops::gated_rmsnorm_forward(out, rstd, r.o, gate, r.w, c.heads, act, 1e-5);
      ops::gated_rmsnorm_backward(d_o, gated ? dz : Tensor(), dw, r.dout, r.o, gate, r.w, rstd, c.heads, act);

      Tensor go = to_device(r.o, dt), gz = gated ? to_device(r.z, dt) : Tensor(), gw = to_device(r.w, dt);
      Tensor gdw = to_device(r.dw0, dt), gout = Tensor::empty(s, dt, Device::cuda);
      Tensor gdo = Tensor::empty(s, dt, Device::cuda), gdz = gated ? Tensor::empty(s, dt, Device::cuda) : Tensor();
      ops::gated_rmsnorm_backward_recompute(gdo, gdz, gdw, gout, to_device(r.dout, dt), go, gz, gw, c.heads, act, 1e-5);
      EXPECT_TRUE(assert_close("out", out, to_host(gout), tolerance(dt)));
      EXPECT_TRUE(assert_close("do", d_o, to_host(gdo), tolerance(dt)));
      EXPECT_TRUE(assert_close("dweight", dw, to_host(gdw), tolerance(dt)));
      if (gated) {
        EXPECT_TRUE(assert_close("dz", dz, to_host(gdz), tolerance(dt)));
      }
    }
  }
}

// d_o or dz written over dout: the same bits as into separate tensors (in registers and read twice).
TEST_P(GpuNorm, GatedRmsNormAliasesDout) {
  const DType dt = GetParam();
  Rng rng(5);
  for (const GatedCase c : {GatedCase{70, 4, 128}, GatedCase{9, 1, 301}, GatedCase{5, 2, 2056}}) {
    for (GateActivation act : {GateActivation::none, GateActivation::silu}) {
      SCOPED_TRACE("dv " + std::to_string(c.dv) + " act " + std::to_string(static_cast<int>(act)));
      GatedRun separate = gated_inputs(c, dt, rng);
      run_gated_device(separate, c, dt, act, Alias::none);
      for (Alias alias : {Alias::d_o, Alias::dz}) {
        if (alias == Alias::dz && act == GateActivation::none) continue;
        GatedRun aliased = separate;
        run_gated_device(aliased, c, dt, act, alias);
        EXPECT_TRUE(same_bits(separate.d_o, aliased.d_o));
        EXPECT_TRUE(same_bits(separate.dw, aliased.dw));
        if (act != GateActivation::none) {
          EXPECT_TRUE(same_bits(separate.dz, aliased.dz));
        }
      }
    }
  }
}

// dweight twice from the same inputs: the same bits (block partials in registers, and the column
// sums of groups read twice).
TEST_P(GpuNorm, WeightGradientIsRepeatable) {
  const DType dt = GetParam();
  Rng rng(4);
  for (const GatedCase c :
       {GatedCase{5000, 1, 512}, GatedCase{3001, 4, 64}, GatedCase{4099, 1, 256}, GatedCase{700, 2, 2056}}) {
    SCOPED_TRACE("dv " + std::to_string(c.dv));
    GatedRun first = gated_inputs(c, dt, rng);
    run_gated_device(first, c, dt, GateActivation::silu, Alias::none);
    GatedRun second = first;
    run_gated_device(second, c, dt, GateActivation::silu, Alias::none);
    EXPECT_TRUE(same_bits(first.dw, second.dw));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuNorm, ::testing::Values(DType::f32, DType::bf16), testing::dtype_test_name);

}  // namespace
}  // namespace linea
