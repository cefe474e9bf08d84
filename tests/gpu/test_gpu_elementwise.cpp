// CUDA elementwise ops against the CPU reference (f64 on the same inputs), in f32 and bf16, on
// sizes that exercise the 16-byte pack path, its tail, and unaligned storage (a view that starts
// one element in): add_inplace, SwiGLU, the sigmoid gate, the log forget gate and the decay gate (forward, backward,
// parameter gradients accumulated deterministically, and the aliasing the CPU ops allow), and the
// element type conversions convert / add_converted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/ops.h"
#include "tests/gpu/gpu_test.h"

namespace linea {
namespace {

using testing::assert_close;
using testing::random_values;
using testing::to_device;
using testing::to_host;
using testing::tolerance;

class GpuElementwise : public testing::GpuDtypeTest {};

// Row counts × widths: one element, a pack tail, an odd width, and a model-like shape.
const std::vector<std::pair<int64_t, int64_t>> kShapes = {{1, 1}, {3, 13}, {17, 40}, {129, 96}, {512, 1024}};

// The rows [1, rows) of a device copy: storage that starts one element past an aligned address.
Tensor unaligned_device(const Tensor& host, DType dtype) {
  const int64_t rows = host.dim(0), width = host.numel() / rows;
  Tensor padded = Tensor::zeros({rows * width + 1}, DType::f64);
  std::copy_n(host.data<double>(), host.numel(), padded.data<double>() + 1);
  return to_device(padded, dtype).reshape({rows * width + 1}).slice(1, rows * width + 1).reshape(host.shape());
}

TEST_P(GpuElementwise, AddInplace) {
  const DType dt = GetParam();
  Rng rng(1);
  for (auto [rows, width] : kShapes) {
    const Tensor y = random_values({rows, width}, dt, rng), x = random_values({rows, width}, dt, rng);
    Tensor ref = y.clone();
    ops::add_inplace(ref, x);
    Tensor dy = to_device(y, dt);
    ops::add_inplace(dy, to_device(x, dt));
    EXPECT_TRUE(assert_close("y", ref, to_host(dy), tolerance(dt)));
    Tensor uy = unaligned_device(y, dt);
    ops::add_inplace(uy, unaligned_device(x, dt));
    EXPECT_TRUE(assert_close("unaligned y", ref, to_host(uy), tolerance(dt)));
  }
}

TEST_P(GpuElementwise, Swiglu) {
  const DType dt = GetParam();
  Rng rng(2);
  for (auto [rows, width] : kShapes) {
    const Shape s{rows, width};
    const Tensor gate = random_values(s, dt, rng, -4, 4), up = random_values(s, dt, rng),
                 dout = random_values(s, dt, rng);
    Tensor out = Tensor::empty(s, DType::f64), dgate = Tensor::empty(s, DType::f64), dup = Tensor::empty(s, DType::f64);
    ops::swiglu_forward(out, gate, up);
    ops::swiglu_backward(dgate, dup, dout, gate, up);

    Tensor g = to_device(gate, dt), u = to_device(up, dt), d = to_device(dout, dt);
    Tensor o = Tensor::empty(s, dt, Device::cuda), dg = Tensor::empty(s, dt, Device::cuda);
    Tensor du = Tensor::empty(s, dt, Device::cuda);
    ops::swiglu_forward(o, g, u);
    ops::swiglu_backward(dg, du, d, g, u);
    EXPECT_TRUE(assert_close("out", out, to_host(o), tolerance(dt)));
    EXPECT_TRUE(assert_close("dgate", dgate, to_host(dg), tolerance(dt)));
    EXPECT_TRUE(assert_close("dup", dup, to_host(du), tolerance(dt)));

    ops::swiglu_backward(g, du, d, g, u);  // dgate written over gate, as the CPU op allows
    EXPECT_TRUE(assert_close("dgate over gate", dgate, to_host(g), tolerance(dt)));

    Tensor uo = unaligned_device(out, dt);
    ops::swiglu_forward(uo, unaligned_device(gate, dt), unaligned_device(up, dt));
    EXPECT_TRUE(assert_close("unaligned out", out, to_host(uo), tolerance(dt)));
  }
}

TEST_P(GpuElementwise, SigmoidGate) {
  const DType dt = GetParam();
  Rng rng(3);
  for (double scale : {1.0, 2.0}) {
    for (auto [rows, width] : kShapes) {
      const Shape s{rows, width};
      const Tensor logits = random_values(s, dt, rng, -8, 8), dbeta = random_values(s, dt, rng);
      Tensor beta = Tensor::empty(s, DType::f64), dlogits = Tensor::empty(s, DType::f64);
      ops::sigmoid_gate_forward(beta, logits, scale);
      // The backward reads β as the device stores it.
      const Tensor beta_stored = testing::representable(beta, dt);
      ops::sigmoid_gate_backward(dlogits, dbeta, beta_stored, scale);

      Tensor b = Tensor::empty(s, dt, Device::cuda), dl = Tensor::empty(s, dt, Device::cuda);
      ops::sigmoid_gate_forward(b, to_device(logits, dt), scale);
      ops::sigmoid_gate_backward(dl, to_device(dbeta, dt), to_device(beta_stored, dt), scale);
      EXPECT_TRUE(assert_close("beta", beta, to_host(b), tolerance(dt)));
      EXPECT_TRUE(assert_close("dlogits", dlogits, to_host(dl), tolerance(dt)));
    }
  }
}

// The log forget gate with and without a lower bound (GLA's normalizer 16, HGRN's 1); the lower
// bound's gradient stays on the CPU.
TEST_P(GpuElementwise, LogForgetGate) {
  const DType dt = GetParam();
  Rng rng(6);
  for (const bool bounded : {false, true}) {
    for (const double normalizer : {1.0, 16.0}) {
      const Shape s{70, 37};
      const Tensor logits = random_values(s, dt, rng, -12, 12), dg = random_values(s, dt, rng);
      const Tensor lb = bounded ? random_values({37}, dt, rng, 0.0, 0.9) : Tensor();
      Tensor g = Tensor::empty(s, DType::f64), dlogits = Tensor::empty(s, DType::f64);
      ops::log_forget_gate_forward(g, logits, lb, normalizer);
      ops::log_forget_gate_backward(dlogits, Tensor(), dg, logits, lb, normalizer);

      const Tensor d_lb = bounded ? to_device(lb, dt) : Tensor();
      Tensor d_g = Tensor::empty(s, dt, Device::cuda), d_dlogits = Tensor::empty(s, dt, Device::cuda);
      ops::log_forget_gate_forward(d_g, to_device(logits, dt), d_lb, normalizer);
      ops::log_forget_gate_backward(d_dlogits, Tensor(), to_device(dg, dt), to_device(logits, dt), d_lb, normalizer);
      EXPECT_TRUE(assert_close("g", g, to_host(d_g), tolerance(dt)));
      EXPECT_TRUE(assert_close("dlogits", dlogits, to_host(d_dlogits), tolerance(dt)));
    }
  }
}

TEST_P(GpuElementwise, DecayGate) {
  const DType dt = GetParam();
  Rng rng(4);
  struct Case {
    int64_t rows, heads, per_head;
  };
  for (const Case c : {Case{1, 1, 1}, Case{70, 4, 1}, Case{33, 3, 5}, Case{300, 4, 64}}) {
    const int64_t width = c.heads * c.per_head;
    const Shape s{c.rows, width};
    const Tensor a = random_values(s, dt, rng, -6, 6), dg = random_values(s, dt, rng);
    const Tensor A_log = random_values({c.heads}, dt, rng, -1, 1.5), dt_bias = random_values({width}, dt, rng);
    const Tensor dA0 = random_values({c.heads}, dt, rng), ddt0 = random_values({width}, dt, rng);
    Tensor g = Tensor::empty(s, DType::f64), da = Tensor::empty(s, DType::f64);
    Tensor dA = dA0.clone(), ddt = ddt0.clone();
    ops::decay_gate_forward(g, a, A_log, dt_bias);
    ops::decay_gate_backward(da, dA, ddt, dg, a, A_log, dt_bias);

    Tensor d_a = to_device(a, dt), d_A = to_device(A_log, dt), d_bias = to_device(dt_bias, dt);
    Tensor d_g = Tensor::empty(s, dt, Device::cuda), d_da = to_device(dg, dt);
    Tensor d_dA = to_device(dA0, dt), d_ddt = to_device(ddt0, dt);
    ops::decay_gate_forward(d_g, d_a, d_A, d_bias);
    ops::decay_gate_backward(d_da, d_dA, d_ddt, d_da, d_a, d_A, d_bias);  // da written over dg
    EXPECT_TRUE(assert_close("g", g, to_host(d_g), tolerance(dt)));
    EXPECT_TRUE(assert_close("da", da, to_host(d_da), tolerance(dt)));
    EXPECT_TRUE(assert_close("dA_log", dA, to_host(d_dA), tolerance(dt)));
    EXPECT_TRUE(assert_close("ddt_bias", ddt, to_host(d_ddt), tolerance(dt)));
  }
}

TEST_P(GpuElementwise, DecayGateParameterGradientsAreDeterministic) {
  const DType dt = GetParam();
  Rng rng(5);
  const int64_t rows = 4099, heads = 4, per_head = 16, width = heads * per_head;
  Tensor a = to_device(random_values({rows, width}, dt, rng), dt),
         dg = to_device(random_values({rows, width}, dt, rng), dt);
  Tensor A_log = to_device(random_values({heads}, dt, rng), dt), bias = to_device(random_values({width}, dt, rng), dt);
  auto run = [&] {
    Tensor da = Tensor::empty({rows, width}, dt, Device::cuda);
    Tensor dA = Tensor::zeros({heads}, dt, Device::cuda), ddt = Tensor::zeros({width}, dt, Device::cuda);
    ops::decay_gate_backward(da, dA, ddt, dg, a, A_log, bias);
    return std::make_pair(dA.clone(), ddt.clone());
  };
  const auto first = run(), second = run();
  EXPECT_EQ(0, std::memcmp(first.first.raw(), second.first.raw(), first.first.nbytes()));
  EXPECT_EQ(0, std::memcmp(first.second.raw(), second.second.raw(), first.second.nbytes()));
}

// convert between f32 and bf16 (both ways) rounds exactly as the CPU op (round-to-nearest-even from
// f32: bit-identical); add_converted (f32 += bf16, bf16 += f32) agrees to one rounding of y's dtype.
TEST_P(GpuElementwise, ConvertAndAddConverted) {
  const DType from = GetParam(), to = from == DType::f32 ? DType::bf16 : DType::f32;
  Rng rng(6);
  for (auto [rows, width] : kShapes) {
    const Shape s{rows, width};
    Tensor host_in = Tensor::empty(s, from);
    ops::convert(host_in, random_values(s, DType::f32, rng, -3, 3));  // f32 values, rounded once if bf16
    Tensor ref = Tensor::empty(s, to);
    ops::convert(ref, host_in);
    Tensor in = Tensor::empty(s, from, Device::cuda), out = Tensor::empty(s, to, Device::cuda);
    in.copy_from(host_in);
    ops::convert(out, in);
    EXPECT_EQ(0, std::memcmp(out.clone().raw(), ref.raw(), ref.nbytes())) << rows << " × " << width;

    Tensor host_y = Tensor::empty(s, to);
    ops::convert(host_y, random_values(s, DType::f32, rng));
    Tensor y = Tensor::empty(s, to, Device::cuda);
    y.copy_from(host_y);
    ops::add_converted(host_y, host_in);
    ops::add_converted(y, in);
    EXPECT_TRUE(assert_close("add_converted", to_host(host_y), to_host(y), to == DType::bf16 ? 5e-3 : 1e-7));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuElementwise, ::testing::Values(DType::f32, DType::bf16), testing::dtype_test_name);

}  // namespace
}  // namespace linea
