// HGRN's CUDA scan (model/mixers/hgrn/cuda/hgrn.h) against the recurrent CPU op in f64 on the same
// inputs: o, ht, dx, dg, dh0 in f32 and bf16 (x and do; g, h0, dht f32) at fla's err_ratio limits
// (f32 1e-5, bf16 5e-3). Shapes: packed documents [0, 15, 80, 150] with D = 7; one-token,
// exactly-64-token and longer sequences with D = 300 (a partial block of channels); two sequences
// of 1000 tokens with D = 2048; one token in each of 64 sequences (decoding's step); log decays
// logsigmoid(N(0, 1)) / normalizer for normalizers 1 and 0.01 (decays underflow to 0); with and
// without h0. The recurrent forward (decoding's one-token kernel) on the same shapes: GpuHgrnRecurrent.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "model/mixers/hgrn/hgrn.h"
#include "tests/gpu/gpu_test.h"
#include "tests/testing/mixers/random_problem.h"

namespace linea {
namespace {

struct Case {
  const char* name;
  std::vector<int64_t> cu_seqlens;
  int64_t channels;
  double normalizer;
  bool with_h0;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"packed_15_80_150_D7", {0, 15, 80, 150}, 7, 1.0, true},
      {"packed_15_80_150_D7_strong", {0, 15, 80, 150}, 7, 0.01, true},
      {"packed_1_64_65_200_D300", {0, 1, 65, 130, 335}, 300, 1.0, true},
      {"packed_1_64_65_200_D300_noh0", {0, 1, 65, 130, 335}, 300, 1.0, false},
      {"B2_T1000_D2048", {0, 1000, 2000}, 2048, 1.0, true},
      {"step_S64_D300", testing::one_token_each(64), 300, 1.0, true},
  };
  return all;
}

struct Problem {
  SeqLayout seqs;
  ops::HgrnInputs in;
  Tensor d_o, dht;
};

// f64 host tensors: x, do ~ N(0, 1) representable in `dtype`; g, h0, dht in f32.
Problem make_problem(const Case& c, DType dtype, uint64_t seed) {
  Rng rng(seed);
  Problem p;
  p.seqs.cu_seqlens = c.cu_seqlens;
  const int64_t N = p.seqs.num_tokens(), D = c.channels, S = p.seqs.num_seqs();
  const auto normal = [&](Shape shape, DType as) {
    Tensor t = Tensor::empty(std::move(shape), DType::f64);
    fill_normal(t, rng, 0, 1);
    return testing::representable(t, as);
  };
  p.in.x = normal({N, D}, dtype);
  Tensor g = normal({N, D}, DType::f64);
  for (int64_t i = 0; i < g.numel(); ++i) {
    double& v = g.data<double>()[i];
    v = -std::log1p(std::exp(-v)) / c.normalizer;
  }
  p.in.g = testing::representable(g, DType::f32);
  if (c.with_h0) p.in.h0 = normal({S, D}, DType::f32);
  p.d_o = normal({N, D}, dtype);
  p.dht = normal({S, D}, DType::f32);
  return p;
}

struct Result {
  Tensor o, ht, dx, dg, dh0;
};

Result run_cpu(const Problem& p) {
  const int64_t N = p.in.x.dim(0), D = p.in.x.dim(1), S = p.seqs.num_seqs();
  Result r{Tensor::empty({N, D}, DType::f64), Tensor::empty({S, D}, DType::f64), Tensor::empty({N, D}, DType::f64),
           Tensor::empty({N, D}, DType::f64), Tensor::empty({S, D}, DType::f64)};
  ops::hgrn_forward(ops::HgrnImpl::recurrent, p.seqs, p.in, r.o, r.ht);
  ops::HgrnGrads g{r.dx, r.dg, r.dh0};
  ops::hgrn_backward(ops::HgrnImpl::recurrent, p.seqs, p.in, p.d_o, p.dht, g);
  return r;
}

Result run_gpu(const Problem& p, DType dtype) {
  const int64_t N = p.in.x.dim(0), D = p.in.x.dim(1), S = p.seqs.num_seqs();
  const auto dev = [](const Tensor& t, DType as) { return t.defined() ? testing::to_device(t, as) : Tensor(); };
  const ops::HgrnInputs in{dev(p.in.x, dtype), dev(p.in.g, DType::f32), dev(p.in.h0, DType::f32)};
  Tensor o = Tensor::empty({N, D}, dtype, Device::cuda), ht = Tensor::empty({S, D}, DType::f32, Device::cuda);
  ops::hgrn_forward(ops::HgrnImpl::chunked, p.seqs, in, o, ht);
  ops::HgrnGrads g{Tensor::empty({N, D}, dtype, Device::cuda), Tensor::empty({N, D}, DType::f32, Device::cuda),
                   Tensor::empty({S, D}, DType::f32, Device::cuda)};
  ops::hgrn_backward(ops::HgrnImpl::chunked, p.seqs, in, dev(p.d_o, dtype), dev(p.dht, DType::f32), g);
  return {testing::to_host(o), testing::to_host(ht), testing::to_host(g.dx), testing::to_host(g.dg),
          testing::to_host(g.dh0)};
}

using Param = testing::CaseInDtype;

std::vector<Param> all_params() { return testing::in_both_dtypes(cases().size()); }

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return testing::case_dtype_name(cases()[info.param.index].name, info.param.dtype);
}

class GpuHgrn : public testing::GpuTest, public ::testing::WithParamInterface<Param> {};

TEST_P(GpuHgrn, MatchesCpuInF64) {
  const Param prm = GetParam();
  const Problem p = make_problem(cases()[prm.index], prm.dtype, 11 + prm.index);
  const Result ref = run_cpu(p), got = run_gpu(p, prm.dtype);
  const double tol = testing::tolerance(prm.dtype);
  EXPECT_TRUE(testing::assert_close("o", ref.o, got.o, tol, 0));
  EXPECT_TRUE(testing::assert_close("ht", ref.ht, got.ht, tol, 0));
  EXPECT_TRUE(testing::assert_close("dx", ref.dx, got.dx, tol, 0));
  EXPECT_TRUE(testing::assert_close("dg", ref.dg, got.dg, tol, 0));
  EXPECT_TRUE(testing::assert_close("dh0", ref.dh0, got.dh0, tol, 0));
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuHgrn, ::testing::ValuesIn(all_params()), param_name);

// The recurrent forward on CUDA (hgrn_recurrent.cu: decoding's one-token step) against the CPU
// recurrent op: o at the dtype's tolerance, ht at f32's (f32 arithmetic in both dtypes); the in-place
// update (ht = h0) gives the same bits as a separate ht.
class GpuHgrnRecurrent : public testing::GpuTest, public ::testing::WithParamInterface<Param> {};

TEST_P(GpuHgrnRecurrent, MatchesCpuRecurrentInF64) {
  const Param prm = GetParam();
  const Problem p = make_problem(cases()[prm.index], prm.dtype, 41 + prm.index);
  const Result ref = run_cpu(p);
  const int64_t N = p.in.x.dim(0), D = p.in.x.dim(1), S = p.seqs.num_seqs();
  ops::HgrnInputs in{testing::to_device(p.in.x, prm.dtype), testing::to_device(p.in.g, DType::f32),
                     p.in.h0.defined() ? testing::to_device(p.in.h0, DType::f32) : Tensor()};
  Tensor o = Tensor::empty({N, D}, prm.dtype, Device::cuda), ht = Tensor::empty({S, D}, DType::f32, Device::cuda);
  ops::hgrn_forward(ops::HgrnImpl::recurrent, p.seqs, in, o, ht);
  EXPECT_TRUE(testing::assert_close("o", ref.o, testing::to_host(o), testing::tolerance(prm.dtype), 0));
  EXPECT_TRUE(testing::assert_close("ht", ref.ht, testing::to_host(ht), testing::tolerance(DType::f32), 0));

  Tensor h = testing::device_state(in.h0, {S, D});
  in.h0 = h;
  Tensor o_in_place = Tensor::empty({N, D}, prm.dtype, Device::cuda);
  ops::hgrn_forward(ops::HgrnImpl::recurrent, p.seqs, in, o_in_place, h);
  EXPECT_TRUE(testing::same_bits("in-place ht", ht, h));
  EXPECT_TRUE(testing::same_bits("in-place o", o, o_in_place));
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuHgrnRecurrent, ::testing::ValuesIn(all_params()), param_name);

}  // namespace
}  // namespace linea
