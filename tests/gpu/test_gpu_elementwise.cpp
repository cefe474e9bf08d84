// CUDA elementwise ops against the CPU reference (f64 on the same inputs), in f32 and bf16, on
// sizes that exercise the 16-byte pack path, its tail, and unaligned storage (a view that starts
// one element in): add_inplace, SwiGLU, the sigmoid gate, the log forget gate and the decay gate (forward, backward,
// parameter gradients accumulated deterministically, and the aliasing the CPU ops allow), and the
// element type conversions convert / add_converted; the gate and element-wise ops of HGRN, HGRN-2,
// Mamba-2 and RWKV-6; the column-block copies of the full-width norms under tensor parallelism
// (ColumnBlocks, not yet run on a GPU); and the row copies of the decoding states (RowCopies).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ops.h"
#include "kernels/seq_layout.h"
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

// A SwiGLU problem: gate (in [−4, 4)), up and dout in dt's values, and the CPU's f64 forward and
// backward on them.
struct SwigluProblem {
  Shape shape;
  Tensor gate, up, dout, out, dgate, dup;
  SwigluProblem(const Shape& s, DType dt, Rng& rng)
      : shape(s),
        gate(random_values(s, dt, rng, -4, 4)),
        up(random_values(s, dt, rng)),
        dout(random_values(s, dt, rng)),
        out(Tensor::empty(s, DType::f64)),
        dgate(Tensor::empty(s, DType::f64)),
        dup(Tensor::empty(s, DType::f64)) {
    ops::swiglu_forward(out, gate, up);
    ops::swiglu_backward(dgate, dup, dout, gate, up);
  }
  // GPU results out, dgate and dup against the CPU's; `what` prefixes the names in failures.
  void expect_results(const Tensor& o, const Tensor& dg, const Tensor& du, const std::string& what = "") const {
    EXPECT_TRUE(assert_close(what + "out", out, to_host(o), tolerance(o.dtype())));
    EXPECT_TRUE(assert_close(what + "dgate", dgate, to_host(dg), tolerance(dg.dtype())));
    EXPECT_TRUE(assert_close(what + "dup", dup, to_host(du), tolerance(du.dtype())));
  }
};

// A SwiGLU problem's inputs on the GPU in dt, and GPU outputs of its shape.
struct SwigluOnDevice {
  Tensor gate, up, dout, out, dgate, dup;
  SwigluOnDevice(const SwigluProblem& p, DType dt)
      : gate(to_device(p.gate, dt)),
        up(to_device(p.up, dt)),
        dout(to_device(p.dout, dt)),
        out(Tensor::empty(p.shape, dt, Device::cuda)),
        dgate(Tensor::empty(p.shape, dt, Device::cuda)),
        dup(Tensor::empty(p.shape, dt, Device::cuda)) {}
};

TEST_P(GpuElementwise, Swiglu) {
  const DType dt = GetParam();
  Rng rng(2);
  for (auto [rows, width] : kShapes) {
    const SwigluProblem p({rows, width}, dt, rng);
    SwigluOnDevice g(p, dt);
    ops::swiglu_forward(g.out, g.gate, g.up);
    ops::swiglu_backward(g.dgate, g.dup, g.dout, g.gate, g.up);
    p.expect_results(g.out, g.dgate, g.dup);

    ops::swiglu_backward(g.gate, g.dup, g.dout, g.gate, g.up);  // dgate written over gate, as the CPU op allows
    EXPECT_TRUE(assert_close("dgate over gate", p.dgate, to_host(g.gate), tolerance(dt)));

    Tensor uo = unaligned_device(p.out, dt);
    ops::swiglu_forward(uo, unaligned_device(p.gate, dt), unaligned_device(p.up, dt));
    EXPECT_TRUE(assert_close("unaligned out", p.out, to_host(uo), tolerance(dt)));
  }
}

// swiglu_backward_with_product against the CPU's forward and backward, into separate outputs and
// with the product over dout (as SwiGLUMLP's backward writes h over dh), aligned and not.
TEST_P(GpuElementwise, SwigluBackwardWithProduct) {
  const DType dt = GetParam();
  Rng rng(12);
  for (auto [rows, width] : kShapes) {
    const SwigluProblem p({rows, width}, dt, rng);
    SwigluOnDevice g(p, dt);
    ops::swiglu_backward_with_product(g.dgate, g.dup, g.out, g.dout, g.gate, g.up);
    p.expect_results(g.out, g.dgate, g.dup);

    ops::swiglu_backward_with_product(g.dgate, g.dup, g.dout, g.dout, g.gate, g.up);  // the product over dout
    EXPECT_TRUE(assert_close("out over dout", p.out, to_host(g.dout), tolerance(dt)));
    EXPECT_TRUE(assert_close("dgate (out over dout)", p.dgate, to_host(g.dgate), tolerance(dt)));

    Tensor uo = unaligned_device(p.out, dt), udg = unaligned_device(p.dgate, dt), udu = unaligned_device(p.dup, dt);
    ops::swiglu_backward_with_product(udg, udu, uo, unaligned_device(p.dout, dt), unaligned_device(p.gate, dt),
                                      unaligned_device(p.up, dt));
    p.expect_results(uo, udg, udu, "unaligned ");
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

// The gates and element-wise ops of HGRN, HGRN-2, Mamba-2 and RWKV-6 against the CPU in f64.
Tensor device_zeros(const Shape& s, DType dt) { return Tensor::zeros(s, dt, Device::cuda); }
Tensor host(const Shape& s) { return Tensor::empty(s, DType::f64); }

TEST_P(GpuElementwise, LogForgetGateLowerBoundGradient) {
  const DType dt = GetParam();
  Rng rng(11);
  const Shape s{70, 37};
  const Tensor logits = random_values(s, dt, rng, -12, 12), dg = random_values(s, dt, rng);
  const Tensor lb = random_values({37}, dt, rng, 0.0, 0.9);
  Tensor dlogits = host(s), dlb = Tensor::zeros({37}, DType::f64);
  ops::log_forget_gate_backward(dlogits, dlb, dg, logits, lb, 1.0);
  Tensor d_dlogits = Tensor::empty(s, dt, Device::cuda), d_dlb = device_zeros({37}, dt);
  ops::log_forget_gate_backward(d_dlogits, d_dlb, to_device(dg, dt), to_device(logits, dt), to_device(lb, dt), 1.0);
  EXPECT_TRUE(assert_close("dlogits", dlogits, to_host(d_dlogits), tolerance(dt)));
  EXPECT_TRUE(assert_close("dlower_bound", dlb, to_host(d_dlb), tolerance(dt)));
}

TEST_P(GpuElementwise, ForgetInputAndExpDecay) {
  const DType dt = GetParam();
  Rng rng(12);
  for (auto [rows, width] : kShapes) {
    const Shape s{rows, width};
    const Tensor i = random_values(s, dt, rng, -4, 4), g = random_values(s, dt, rng, -3, 0),
                 d = random_values(s, dt, rng);
    Tensor out = host(s), di = host(s), dg = host(s), eg = host(s), dw = host(s);
    ops::forget_input_forward(out, i, g);
    ops::forget_input_backward(di, dg, d, i, g);
    ops::exp_decay_forward(eg, i);
    const Tensor eg_stored = testing::representable(eg, dt);
    ops::exp_decay_backward(dw, d, eg_stored);
    Tensor o = Tensor::empty(s, dt, Device::cuda), ddi = Tensor::empty(s, dt, Device::cuda);
    Tensor ddg = Tensor::empty(s, dt, Device::cuda), deg = Tensor::empty(s, dt, Device::cuda);
    Tensor ddw = Tensor::empty(s, dt, Device::cuda);
    ops::forget_input_forward(o, to_device(i, dt), to_device(g, dt));
    ops::forget_input_backward(ddi, ddg, to_device(d, dt), to_device(i, dt), to_device(g, dt));
    ops::exp_decay_forward(deg, to_device(i, dt));
    ops::exp_decay_backward(ddw, to_device(d, dt), to_device(eg_stored, dt));
    EXPECT_TRUE(assert_close("forget_input out", out, to_host(o), tolerance(dt)));
    EXPECT_TRUE(assert_close("forget_input di", di, to_host(ddi), tolerance(dt)));
    EXPECT_TRUE(assert_close("forget_input dg", dg, to_host(ddg), tolerance(dt)));
    EXPECT_TRUE(assert_close("exp_decay g", eg, to_host(deg), tolerance(dt)));
    EXPECT_TRUE(assert_close("exp_decay dw", dw, to_host(ddw), tolerance(dt)));
  }
}

TEST_P(GpuElementwise, SsdGateAndLayerLowerBound) {
  const DType dt = GetParam();
  Rng rng(13);
  const int64_t rows = 150, heads = 6, layers = 5, width = 40;
  const Shape s{rows, heads};
  const Tensor dtv = random_values(s, dt, rng, -4, 4), A_log = random_values({heads}, dt, rng, -1, 1.5);
  const Tensor bias = random_values({heads}, dt, rng), dg = random_values(s, dt, rng),
               ddelta = random_values(s, dt, rng);
  Tensor g = host(s), delta = host(s), ddt = host(s);
  Tensor dA = Tensor::zeros({heads}, DType::f64), dbias = Tensor::zeros({heads}, DType::f64);
  ops::ssd_gate_forward(g, delta, dtv, A_log, bias);
  ops::ssd_gate_backward(ddt, dA, dbias, dg, ddelta, dtv, A_log, bias);
  Tensor d_g = Tensor::empty(s, dt, Device::cuda), d_delta = Tensor::empty(s, dt, Device::cuda);
  Tensor d_ddt = Tensor::empty(s, dt, Device::cuda), d_dA = device_zeros({heads}, dt),
         d_dbias = device_zeros({heads}, dt);
  const Tensor d_dt = to_device(dtv, dt), d_A = to_device(A_log, dt), d_b = to_device(bias, dt);
  ops::ssd_gate_forward(d_g, d_delta, d_dt, d_A, d_b);
  ops::ssd_gate_backward(d_ddt, d_dA, d_dbias, to_device(dg, dt), to_device(ddelta, dt), d_dt, d_A, d_b);
  EXPECT_TRUE(assert_close("ssd g", g, to_host(d_g), tolerance(dt)));
  EXPECT_TRUE(assert_close("ssd delta", delta, to_host(d_delta), tolerance(dt)));
  EXPECT_TRUE(assert_close("ssd ddt", ddt, to_host(d_ddt), tolerance(dt)));
  EXPECT_TRUE(assert_close("ssd dA_log", dA, to_host(d_dA), tolerance(dt)));
  EXPECT_TRUE(assert_close("ssd ddt_bias", dbias, to_host(d_dbias), tolerance(dt)));

  const Tensor gamma = random_values({layers, width}, dt, rng, -2, 2), dlb = random_values({width}, dt, rng);
  for (int64_t layer = 1; layer < layers; ++layer) {  // layer 0 takes no bound (all zeros)
    Tensor lb = host({width}), dgamma = Tensor::zeros({layers, width}, DType::f64);
    ops::layer_lower_bound_forward(lb, gamma, layer);
    ops::layer_lower_bound_backward(dgamma, dlb, gamma, layer);
    Tensor d_lb = Tensor::empty({width}, dt, Device::cuda), d_dgamma = device_zeros({layers, width}, dt);
    ops::layer_lower_bound_forward(d_lb, to_device(gamma, dt), layer);
    ops::layer_lower_bound_backward(d_dgamma, to_device(dlb, dt), to_device(gamma, dt), layer);
    EXPECT_TRUE(assert_close("lower_bound", lb, to_host(d_lb), tolerance(dt)));
    EXPECT_TRUE(assert_close("dgamma", dgamma, to_host(d_dgamma), tolerance(dt)));
  }
}

TEST_P(GpuElementwise, Activations) {
  const DType dt = GetParam();
  Rng rng(14);
  for (const ops::Activation act : {ops::Activation::silu, ops::Activation::tanh}) {
    for (auto [rows, width] : kShapes) {
      const Shape s{rows, width};
      const Tensor x = random_values(s, dt, rng, -5, 5), d = random_values(s, dt, rng);
      Tensor out = host(s), dx = host(s);
      ops::activation_forward(out, x, act);
      const Tensor saved = act == ops::Activation::silu ? x : testing::representable(out, dt);
      ops::activation_backward(dx, d, saved, act);
      Tensor o = Tensor::empty(s, dt, Device::cuda), ddx = Tensor::empty(s, dt, Device::cuda);
      ops::activation_forward(o, to_device(x, dt), act);
      ops::activation_backward(ddx, to_device(d, dt), to_device(saved, dt), act);
      EXPECT_TRUE(assert_close("out", out, to_host(o), tolerance(dt)));
      EXPECT_TRUE(assert_close("dx", dx, to_host(ddx), tolerance(dt)));
    }
  }
}

TEST_P(GpuElementwise, TokenShiftAndLerp) {
  const DType dt = GetParam();
  Rng rng(15);
  const SeqLayout seqs{{0, 1, 20, 20, 57, 90}};
  const Shape s{90, 24};
  const Tensor x = random_values(s, dt, rng), dd = random_values(s, dt, rng);
  Tensor delta = host(s), dx = host(s);
  ops::token_shift_forward(delta, x, seqs);
  ops::token_shift_backward(dx, dd, seqs);
  Tensor d_delta = Tensor::empty(s, dt, Device::cuda), d_dx = Tensor::empty(s, dt, Device::cuda);
  ops::token_shift_forward(d_delta, to_device(x, dt), seqs);
  ops::token_shift_backward(d_dx, to_device(dd, dt), seqs);
  EXPECT_TRUE(assert_close("delta", delta, to_host(d_delta), tolerance(dt)));
  EXPECT_TRUE(assert_close("token_shift dx", dx, to_host(d_dx), tolerance(dt)));

  const Tensor dl = random_values(s, dt, rng), dout = random_values(s, dt, rng), ddelta0 = random_values(s, dt, rng);
  for (const bool per_row : {false, true}) {
    const Shape mu_shape = per_row ? s : Shape{24};
    const Tensor mu = random_values(mu_shape, dt, rng),
                 dmu0 = per_row ? Tensor::zeros(s, DType::f64) : random_values(mu_shape, dt, rng);
    Tensor out = host(s), ddelta = ddelta0.clone(), dmu = dmu0.clone();
    ops::lerp_forward(out, x, dl, mu);
    ops::lerp_backward(ddelta, dmu, dout, dl, mu);
    Tensor o = Tensor::empty(s, dt, Device::cuda), d_ddelta = to_device(ddelta0, dt), d_dmu = to_device(dmu0, dt);
    const Tensor d_mu = to_device(mu, dt), d_dl = to_device(dl, dt);
    ops::lerp_forward(o, to_device(x, dt), d_dl, d_mu);
    ops::lerp_backward(d_ddelta, d_dmu, to_device(dout, dt), d_dl, d_mu);
    EXPECT_TRUE(assert_close("lerp out", out, to_host(o), tolerance(dt)));
    EXPECT_TRUE(assert_close("lerp ddelta", ddelta, to_host(d_ddelta), tolerance(dt)));
    EXPECT_TRUE(assert_close("lerp dmu", dmu, to_host(d_dmu), tolerance(dt)));
  }
}

TEST_P(GpuElementwise, GroupNorm) {
  const DType dt = GetParam();
  Rng rng(16);
  for (const int64_t groups : {1, 4, 3}) {
    const int64_t rows = 65, width = groups * 48;
    const Shape s{rows, width};
    const Tensor x = random_values(s, dt, rng, -2, 3), w = random_values({width}, dt, rng, 0.5, 1.5);
    const Tensor b = random_values({width}, dt, rng), dout = random_values(s, dt, rng);
    Tensor out = host(s), mean = host({rows, groups}), rstd = host({rows, groups}), dx = host(s);
    Tensor dw = Tensor::zeros({width}, DType::f64), db = Tensor::zeros({width}, DType::f64);
    ops::group_norm_forward(out, mean, rstd, x, w, b, groups, 1e-5);
    ops::group_norm_backward(dx, dw, db, dout, x, w, mean, rstd, groups);
    const Tensor d_x = to_device(x, dt), d_w = to_device(w, dt);
    Tensor o = Tensor::empty(s, dt, Device::cuda), d_dx = Tensor::empty(s, dt, Device::cuda);
    Tensor d_mean = Tensor::empty({rows, groups}, testing::kStatistics, Device::cuda);
    Tensor d_rstd = Tensor::empty({rows, groups}, testing::kStatistics, Device::cuda);
    Tensor d_dw = device_zeros({width}, dt), d_db = device_zeros({width}, dt);
    ops::group_norm_forward(o, d_mean, d_rstd, d_x, d_w, to_device(b, dt), groups, 1e-5);
    ops::group_norm_backward(d_dx, d_dw, d_db, to_device(dout, dt), d_x, d_w, d_mean, d_rstd, groups);
    EXPECT_TRUE(assert_close("out", out, to_host(o), tolerance(dt)));
    EXPECT_TRUE(assert_close("mean", mean, to_host(d_mean), 1e-5));
    EXPECT_TRUE(assert_close("rstd", rstd, to_host(d_rstd), 1e-5));
    EXPECT_TRUE(assert_close("dx", dx, to_host(d_dx), tolerance(dt)));
    EXPECT_TRUE(assert_close("dweight", dw, to_host(d_dw), tolerance(dt)));
    EXPECT_TRUE(assert_close("dbias", db, to_host(d_db), tolerance(dt)));
  }
}

TEST_P(GpuElementwise, HeadBroadcasts) {
  const DType dt = GetParam();
  Rng rng(17);
  const int64_t rows = 77, heads = 3, width = 40;
  const Shape narrow{rows, width}, wide{rows, heads * width}, per_head{rows, heads};
  const Tensor x = random_values(narrow, dt, rng), xw = random_values(wide, dt, rng), d = random_values(wide, dt, rng);
  const Tensor sc = random_values(per_head, dt, rng), D = random_values({heads}, dt, rng);
  const Tensor y0 = random_values(wide, dt, rng), dx0 = random_values(wide, dt, rng);
  Tensor rep = host(wide), summed = host(narrow), scaled = host(wide), dxs = host(wide), ds = host(per_head);
  Tensor y = y0.clone(), dxa = dx0.clone(), dD = Tensor::zeros({heads}, DType::f64);
  ops::repeat_heads(rep, x, heads);
  ops::sum_heads(summed, d, heads);
  ops::scale_heads_forward(scaled, xw, sc);
  ops::scale_heads_backward(dxs, ds, d, xw, sc);
  ops::add_scaled_heads_forward(y, xw, D);
  ops::add_scaled_heads_backward(dxa, dD, d, xw, D);

  const Tensor d_xw = to_device(xw, dt), d_d = to_device(d, dt), d_sc = to_device(sc, dt), d_D = to_device(D, dt);
  Tensor d_rep = Tensor::empty(wide, dt, Device::cuda), d_summed = Tensor::empty(narrow, dt, Device::cuda);
  Tensor d_scaled = Tensor::empty(wide, dt, Device::cuda), d_dxs = Tensor::empty(wide, dt, Device::cuda);
  Tensor d_ds = Tensor::empty(per_head, dt, Device::cuda), d_y = to_device(y0, dt), d_dxa = to_device(dx0, dt);
  Tensor d_dD = device_zeros({heads}, dt);
  ops::repeat_heads(d_rep, to_device(x, dt), heads);
  ops::sum_heads(d_summed, d_d, heads);
  ops::scale_heads_forward(d_scaled, d_xw, d_sc);
  ops::scale_heads_backward(d_dxs, d_ds, d_d, d_xw, d_sc);
  ops::add_scaled_heads_forward(d_y, d_xw, d_D);
  ops::add_scaled_heads_backward(d_dxa, d_dD, d_d, d_xw, d_D);
  EXPECT_TRUE(assert_close("repeat_heads", rep, to_host(d_rep), tolerance(dt)));
  EXPECT_TRUE(assert_close("sum_heads", summed, to_host(d_summed), tolerance(dt)));
  EXPECT_TRUE(assert_close("scale_heads out", scaled, to_host(d_scaled), tolerance(dt)));
  EXPECT_TRUE(assert_close("scale_heads dx", dxs, to_host(d_dxs), tolerance(dt)));
  EXPECT_TRUE(assert_close("scale_heads ds", ds, to_host(d_ds), tolerance(dt)));
  EXPECT_TRUE(assert_close("add_scaled_heads y", y, to_host(d_y), tolerance(dt)));
  EXPECT_TRUE(assert_close("add_scaled_heads dx", dxa, to_host(d_dxa), tolerance(dt)));
  EXPECT_TRUE(assert_close("add_scaled_heads dD", dD, to_host(d_dD), tolerance(dt)));
}

// column_slice / column_place (the full-width norms under tensor parallelism): copies, so exact,
// also from and into storage that starts one element past an aligned address.
TEST_P(GpuElementwise, ColumnBlocks) {
  const DType dt = GetParam();
  Rng rng(18);
  for (auto [rows, width] : kShapes) {
    const int64_t begin = width / 4, count = (width + 1) / 2;
    const Tensor x = random_values({rows, width}, dt, rng), block = random_values({rows, count}, dt, rng);
    Tensor slice = host({rows, count}), placed = x.clone();
    ops::column_slice(slice, x, begin);
    ops::column_place(placed, block, begin);
    Tensor d_slice = Tensor::empty({rows, count}, dt, Device::cuda), d_placed = unaligned_device(x, dt);
    ops::column_slice(d_slice, unaligned_device(x, dt), begin);
    ops::column_place(d_placed, unaligned_device(block, dt), begin);
    const Tensor got_slice = to_host(d_slice), got_placed = to_host(d_placed);
    EXPECT_EQ(0, std::memcmp(slice.raw(), got_slice.raw(), slice.nbytes())) << rows << " x " << width;
    EXPECT_EQ(0, std::memcmp(placed.raw(), got_placed.raw(), placed.nbytes())) << rows << " x " << width;
  }
}

// copy_rows (the decoding states' row moves): exact, in every access width the rows allow (16-byte
// rows, 2-byte rows, unaligned storage), scattered and gathered in a shuffled order.
TEST_P(GpuElementwise, RowCopies) {
  const DType dt = GetParam();
  Rng rng(19);
  for (auto [rows, width] : kShapes) {
    const Tensor in = random_values({rows, width}, dt, rng);
    Tensor out = random_values({rows + 3, width}, dt, rng);
    Tensor pairs = Tensor::empty({rows, 2}, DType::i32);
    for (int64_t r = 0; r < rows; ++r) {  // out row rows + 2 − r (each once) from in row 7r mod rows
      pairs.data<int32_t>()[2 * r] = static_cast<int32_t>(rows + 2 - r);
      pairs.data<int32_t>()[2 * r + 1] = static_cast<int32_t>((r * 7) % rows);
    }
    Tensor ref = out.clone();
    ops::copy_rows(ref, in, pairs);
    Tensor d_out = to_device(out, dt), u_out = unaligned_device(out, dt);
    ops::copy_rows(d_out, to_device(in, dt), pairs);
    ops::copy_rows(u_out, unaligned_device(in, dt), pairs);
    const Tensor got = to_host(d_out), got_unaligned = to_host(u_out);
    EXPECT_EQ(0, std::memcmp(ref.raw(), got.raw(), ref.nbytes())) << rows << " x " << width;
    EXPECT_EQ(0, std::memcmp(ref.raw(), got_unaligned.raw(), ref.nbytes())) << rows << " x " << width << " unaligned";
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuElementwise, ::testing::Values(DType::f32, DType::bf16), testing::dtype_test_name);

}  // namespace
}  // namespace linea
