// CUDA causal softmax attention against the CPU op in f64 on the same inputs, in f32 and bf16: out,
// lse, dq, dk, dv for GQA (8 query heads over 2 kv heads) and plain heads, windows 0 (unlimited),
// 37 and 300, packed sequences (an empty one included) whose lengths are not multiples of the
// kernels' 64-token tiles, head dims 32, 64 and 128. The backward runs on the device's own out and
// lse, as in training. Also: two runs give bit-identical results, and an unsupported head dim is a
// clear error. Every comparison prints its err_ratio and max abs error (with window 1 every query
// sees only itself: dq = dk = 0 exactly, and the device's rounding noise passes by abs_err ≤ 1e-6).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "model/mixers/attention/attention.h"
#include "tests/gpu/gpu_test.h"

namespace linea {
namespace {

using testing::assert_close;
using testing::kStatistics;
using testing::random_values;
using testing::to_device;
using testing::to_host;
using testing::tolerance;

class GpuAttention : public testing::GpuDtypeTest {};

struct Case {
  SeqLayout seqs;
  int64_t q_heads, kv_heads, head_dim, window;

  ops::AttentionShape shape() const {
    return {.q_heads = q_heads,
            .kv_heads = kv_heads,
            .head_dim = head_dim,
            .window = window,
            .scale = 1.0 / std::sqrt(static_cast<double>(head_dim))};
  }
  std::string name() const {
    std::string s = "seqs [";
    for (size_t i = 0; i < seqs.cu_seqlens.size(); ++i) s += (i ? "," : "") + std::to_string(seqs.cu_seqlens[i]);
    return s + "] heads " + std::to_string(q_heads) + "/" + std::to_string(kv_heads) + " d " +
           std::to_string(head_dim) + " window " + std::to_string(window);
  }
};

// Inputs (f64, representable in the dtype under test) and every result of one forward + backward.
struct Inputs {
  Tensor q, k, v, dout;
};
struct Results {
  Tensor out, lse, dq, dk, dv;
};

Inputs make_inputs(const Case& c, DType dt, Rng& rng) {
  const int64_t n = c.seqs.num_tokens(), qw = c.q_heads * c.head_dim, kvw = c.kv_heads * c.head_dim;
  // Queries and keys in [−2, 2) make the softmax rows far from uniform at scale 1/√d.
  return {random_values({n, qw}, dt, rng, -2, 2), random_values({n, kvw}, dt, rng, -2, 2),
          random_values({n, kvw}, dt, rng), random_values({n, qw}, dt, rng)};
}

Results run_cpu(const Case& c, const Inputs& in) {
  const int64_t n = c.seqs.num_tokens();
  auto empty = [](const Tensor& like) { return Tensor::empty(like.shape(), DType::f64); };
  Results r{empty(in.q), Tensor::empty({n, c.q_heads}, DType::f64), empty(in.q), empty(in.k), empty(in.v)};
  ops::attention_forward(r.out, r.lse, in.q, in.k, in.v, c.shape(), c.seqs);
  ops::attention_backward(r.dq, r.dk, r.dv, in.dout, in.q, in.k, in.v, r.out, r.lse, c.shape(), c.seqs);
  return r;
}

// The device results, left on the device.
Results run_gpu(const Case& c, const Inputs& in, DType dt) {
  const int64_t n = c.seqs.num_tokens();
  const Tensor q = to_device(in.q, dt), k = to_device(in.k, dt), v = to_device(in.v, dt);
  auto empty = [&](const Tensor& like) { return Tensor::empty(like.shape(), dt, Device::cuda); };
  Results r{empty(in.q), Tensor::empty({n, c.q_heads}, kStatistics, Device::cuda), empty(in.q), empty(in.k),
            empty(in.v)};
  ops::attention_forward(r.out, r.lse, q, k, v, c.shape(), c.seqs);
  ops::attention_backward(r.dq, r.dk, r.dv, to_device(in.dout, dt), q, k, v, r.out, r.lse, c.shape(), c.seqs);
  return r;
}

struct Named {
  const char* name;
  Tensor Results::*member;
};
constexpr Named kOutputs[] = {
    {"out", &Results::out}, {"lse", &Results::lse}, {"dq", &Results::dq}, {"dk", &Results::dk}, {"dv", &Results::dv}};

std::vector<Case> cases() {
  const SeqLayout packed{{0, 15, 100, 300}};
  return {{packed, 8, 2, 64, 0},
          {packed, 8, 2, 64, 37},
          {packed, 8, 2, 128, 0},
          {packed, 8, 2, 128, 37},
          {SeqLayout{{0, 0, 70, 70, 201}}, 4, 4, 32, 0},
          {SeqLayout{{0, 1000}}, 4, 2, 128, 0},
          {SeqLayout{{0, 1000}}, 4, 2, 128, 300},
          {SeqLayout{{0, 1, 2, 131}}, 2, 1, 64, 1}};
}

TEST_P(GpuAttention, MatchesCpu) {
  const DType dt = GetParam();
  Rng rng(11);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name());
    const Inputs in = make_inputs(c, dt, rng);
    const Results ref = run_cpu(c, in), got = run_gpu(c, in, dt);
    for (const Named& o : kOutputs) {
      const Tensor device = to_host(got.*o.member);
      const testing::CloseReport report = testing::compare(ref.*o.member, device);
      std::printf("[attention %s] %-44s %-3s err_ratio %.3g abs_err %.3g\n", std::string(dtype_name(dt)).c_str(),
                  c.name().c_str(), o.name, report.err_ratio, report.abs_err);
      EXPECT_TRUE(assert_close(o.name, ref.*o.member, device, tolerance(dt)));
    }
  }
}

TEST_P(GpuAttention, RunsAreBitIdentical) {
  const DType dt = GetParam();
  Rng rng(12);
  const Case c{SeqLayout{{0, 15, 100, 300, 1300}}, 8, 2, 128, 0};
  const Inputs in = make_inputs(c, dt, rng);
  const Results first = run_gpu(c, in, dt), second = run_gpu(c, in, dt);
  for (const Named& o : kOutputs) {
    const Tensor a = (first.*o.member).clone(), b = (second.*o.member).clone();
    EXPECT_EQ(0, std::memcmp(a.raw(), b.raw(), a.nbytes())) << o.name;
  }
}

TEST_P(GpuAttention, UnsupportedHeadDimIsReported) {
  const DType dt = GetParam();
  const Case c{SeqLayout{{0, 4}}, 2, 1, 48, 0};
  Tensor q = Tensor::zeros({4, 96}, dt, Device::cuda), kv = Tensor::zeros({4, 48}, dt, Device::cuda);
  Tensor out = Tensor::empty({4, 96}, dt, Device::cuda), lse = Tensor::empty({4, 2}, kStatistics, Device::cuda);
  try {
    ops::attention_forward(out, lse, q, kv, kv, c.shape(), c.seqs);
    ADD_FAILURE() << "no error for head_dim 48";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("attention_forward: shape: head_dim 48"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuAttention, ::testing::Values(DType::f32, DType::bf16), testing::dtype_test_name);

}  // namespace
}  // namespace linea
