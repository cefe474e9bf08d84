// The CUDA gated-linear-attention family (model/mixers/gla/cuda/gla.h) against the recurrent CPU op
// in f64 on the same inputs: o, ht and every gradient (dq, dk, dv, dg, du, dh0 as the spec has
// them) for the five presets (gla, retnet, hgrn2, mamba2, rwkv6), in f32 and bf16 (token operands;
// g, u, h0, dht f32), at fla's err_ratio limits (reference/mixers.md §3.3: f32 1e-5; bf16 5e-3, and
// 0.02 for dg — fla's GLA test holds dg to 5e-3 on fp16 inputs, its bf16 tests of the decay
// gradients (GDN, KDA: a decay per channel as GLA's) to 0.02). Shapes:
// B=2 T=75 K=V=64 under the gate normalizers {0.1, 1, 10}; T=130 K=V=128; packed documents
// [0, 15, 100, 300] (normalizers 1, 0.25 and 0.01: at 0.25 a channel's decay across 16 or 17 rows
// is near the block factorization's range limit of 60, so that some channels of a block are steep
// and some not, and at 0.01 decays underflow to 0); K=256 (the largest) with V=100, and with V=64
// over an odd T under normalizer 0.25; odd K and V (36 × 20, 33 × 19, 16 × 48 without h0);
// one-token and exactly-64-token sequences packed together; many (sequence, head) pairs (H=16);
// a sequence of 8300 tokens beside one of 100 (one (sequence, head) pair: the bf16 pipeline's state
// passes run by segments of 64 chunks). The bf16 calls with K and V multiples of 8 (every shape but
// V=100 and the odd K and V) run on the delta rule's tensor-core pipeline as its plain write,
// RWKV-6's (the bonus readout) among them; the others on gla_kernels.cuh. Every bf16 case that saves
// (ops::gla_saved_bytes > 0: those on the pipeline) also runs with its backward from what the
// forward saved (`_saved`). Also: the backward repeats bit for bit, the backward from the saved
// buffer equals the recomputing one bit for bit (on whole sequences and on segments), a call that
// saves nothing refuses a buffer, and a bf16 g or K > 256 on CUDA is rejected by name. The recurrent forward
// (decoding's one-token kernel) against the CPU recurrent op: GpuGlaRecurrent below. The largest err_ratio per mixer,
// dtype and tensor is printed at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "model/mixers/gla/gla.h"
#include "model/mixers/gla/presets.h"
#include "tests/gpu/gpu_test.h"
#include "tests/testing/mixers/gla_problem.h"

namespace linea {
namespace {

using ops::GlaImpl;
using ops::GlaMixer;
using testing::GlaProblem;
using testing::GlaResult;

struct WorstErrRatios : ::testing::Environment {
  std::map<std::string, std::map<std::string, double>> worst;  // [mixer/dtype][tensor]
  void TearDown() override {
    for (const auto& [run, tensors] : worst) {
      std::cout << "[cuda gla err_ratio] " << run << ":";
      for (const auto& [tensor, ratio] : tensors) std::cout << " " << tensor << " " << ratio;
      std::cout << "\n";
    }
  }
};
WorstErrRatios* const worst = static_cast<WorstErrRatios*>(::testing::AddGlobalTestEnvironment(new WorstErrRatios));

// Token operands representable in `dtype`; g, u, h0 and dht in f32 (f64 tensors throughout).
GlaProblem representable(const GlaProblem& p, DType dtype) {
  GlaProblem r = p;
  for (Tensor* t : {&r.in.q, &r.in.k, &r.in.v, &r.d_o}) {
    if (t->defined()) *t = testing::representable(*t, dtype);
  }
  for (Tensor* t : {&r.in.g, &r.in.u, &r.in.h0, &r.dht}) {
    if (t->defined()) *t = testing::representable(*t, DType::f32);
  }
  return r;
}

double tolerance(DType dtype, const std::string& tensor) {
  return dtype == DType::bf16 && tensor == "dg" ? 0.02 : testing::tolerance(dtype);
}

using testing::device_empty;
Tensor device(const Tensor& host, DType dtype) { return testing::device_copy(host, dtype); }

GlaProblem on_device(const GlaProblem& p, DType dtype) {
  GlaProblem d = p;
  for (Tensor* t : {&d.in.q, &d.in.k, &d.in.v, &d.d_o}) *t = device(*t, dtype);
  for (Tensor* t : {&d.in.g, &d.in.u, &d.in.h0, &d.dht}) *t = device(*t, DType::f32);
  return d;
}

ops::GlaGrads device_grads(const GlaProblem& p, DType dtype) {
  return {device_empty(p.in.q, dtype),
          device_empty(p.in.k, dtype),
          device_empty(p.in.v, dtype),
          p.spec.decay == ops::GlaDecay::head ? Tensor() : device_empty(p.in.g, DType::f32),
          device_empty(p.in.u, DType::f32),
          device_empty(p.dht, DType::f32)};
}

// The buffer a forward saves its intermediates into for the backward (ops::gla_saved_bytes),
// undefined for a call that saves none.
Tensor saved_buffer(const GlaProblem& p) {
  const size_t bytes = ops::gla_saved_bytes(p.spec, p.seqs, p.in);
  return bytes ? Tensor::empty({static_cast<int64_t>((bytes + 1) / 2)}, DType::bf16, Device::cuda) : Tensor();
}

// Forward and backward on the device (the backward from what the forward saved, with `save`);
// results as f64 host tensors.
GlaResult run_on_device(const GlaProblem& host, DType dtype, bool save = false) {
  const GlaProblem p = on_device(host, dtype);
  const Tensor saved = save ? saved_buffer(p) : Tensor();
  GlaResult r;
  r.o = device_empty(p.d_o, dtype);
  r.ht = device_empty(p.dht, DType::f32);
  ops::gla_forward(GlaImpl::chunked, p.spec, p.seqs, p.in, r.o, r.ht, saved);
  r.grads = device_grads(p, dtype);
  ops::gla_backward(GlaImpl::chunked, p.spec, p.seqs, p.in, p.d_o, p.dht, r.grads, saved);
  GlaResult h;
  const auto back = [](const Tensor& t) { return t.defined() ? testing::to_host(t) : Tensor(); };
  h.o = back(r.o);
  h.ht = back(r.ht);
  h.grads = {back(r.grads.dq), back(r.grads.dk), back(r.grads.dv),
             back(r.grads.dg), back(r.grads.du), back(r.grads.dh0)};
  return h;
}

struct Case {
  const char* shape_name;
  testing::GlaShape shape;
  double normalizer;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = [] {
    std::vector<Case> c;
    for (double n : {0.1, 1.0, 10.0}) c.push_back({"B2_T75_H2_K64_V64", {{0, 75, 150}, 2, 64, 64, true}, n});
    c.push_back({"B1_T130_H2_K128_V128", {{0, 130}, 2, 128, 128, true}, 1.0});
    for (double n : {1.0, 0.25, 0.01}) {
      c.push_back({"packed_15_100_300_H2_K64_V64", {{0, 15, 100, 300}, 2, 64, 64, true}, n});
    }
    c.push_back({"T200_H2_K256_V100", {{0, 200}, 2, 256, 100, true}, 1.0});
    c.push_back({"T131_H2_K256_V64", {{0, 131}, 2, 256, 64, true}, 0.25});
    c.push_back({"T70_H3_K36_V20", {{0, 70}, 3, 36, 20, true}, 1.0});
    c.push_back({"T70_H1_K33_V19", {{0, 70}, 1, 33, 19, true}, 1.0});
    c.push_back({"T64_H1_K16_V48_noh0", {{0, 64}, 1, 16, 48, false}, 1.0});
    c.push_back({"packed_1_64_1_H2_K32_V40", {{0, 1, 65, 66, 140}, 2, 32, 40, true}, 1.0});
    c.push_back({"packed9_H16_K64_V80", {{0, 40, 75, 140, 150, 200, 265, 300, 330, 400}, 16, 64, 80, true}, 1.0});
    c.push_back({"segments_packed_100_8400_H1_K64_V64", {{0, 100, 8400}, 1, 64, 64, true}, 1.0});
    return c;
  }();
  return all;
}

// save: the backward runs from what the forward saved.
struct Param {
  GlaMixer mixer;
  size_t case_index;
  DType dtype;
  bool save = false;
};

// Whether the bf16 call of a mixer on a case saves its intermediates: the bf16 pipeline's plain
// write (model/mixers/gla/cuda/gla.cu) takes K and V multiples of 8 (V ≤ 512), RWKV-6's bonus
// readout among them; the other cases run gla_kernels.cuh and save nothing (checked by SavedBytes).
bool bf16_saves(GlaMixer, const testing::GlaShape& s) {
  return s.key_dim % 8 == 0 && s.value_dim % 8 == 0 && s.value_dim <= 512;
}

std::vector<Param> all_params() {
  std::vector<Param> params;
  for (GlaMixer m : ops::gla_mixers()) {
    for (size_t c = 0; c < cases().size(); ++c) {
      // RetNet's decays are fixed: no normalizer to vary.
      if (m == GlaMixer::retnet && cases()[c].normalizer != 1.0) continue;
      for (DType dtype : {DType::f32, DType::bf16}) params.push_back({m, c, dtype});
      if (bf16_saves(m, cases()[c].shape)) params.push_back({m, c, DType::bf16, true});
    }
  }
  return params;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const Case& c = cases()[info.param.case_index];
  return std::string(ops::gla_mixer_name(info.param.mixer)) + "_" + c.shape_name + "_norm" +
         testing::name_number(c.normalizer) + "_" + std::string(dtype_name(info.param.dtype)) +
         (info.param.save ? "_saved" : "");
}

class GpuGla : public testing::GpuTest, public ::testing::WithParamInterface<Param> {};

TEST_P(GpuGla, MatchesCpuInF64) {
  const Param prm = GetParam();
  const Case& c = cases()[prm.case_index];
  const GlaProblem p =
      representable(testing::make_gla_problem(prm.mixer, c.shape, c.normalizer, 77 + prm.case_index), prm.dtype);
  const auto ref = testing::run_forward_backward(GlaImpl::recurrent, p).named();
  if (prm.save) {
    ASSERT_GT(ops::gla_saved_bytes(p.spec, p.seqs, on_device(p, prm.dtype).in), 0u);
  }
  const auto got = run_on_device(p, prm.dtype, prm.save).named();
  ASSERT_EQ(ref.size(), got.size());
  auto& w = worst->worst[std::string(ops::gla_mixer_name(prm.mixer)) + "/" + std::string(dtype_name(prm.dtype))];
  for (size_t i = 0; i < ref.size(); ++i) {
    const std::string& name = ref[i].first;
    ASSERT_EQ(name, got[i].first);
    EXPECT_TRUE(testing::assert_close(name, ref[i].second, got[i].second, tolerance(prm.dtype, name), 0));
    w[name] = std::max(w[name], testing::compare(ref[i].second, got[i].second).err_ratio);
  }
}

INSTANTIATE_TEST_SUITE_P(Mixers, GpuGla, ::testing::ValuesIn(all_params()), param_name);

// ---- The recurrent forward on CUDA (gla_recurrent.cu: decoding's one-token step) against the CPU
// recurrent op in f64, on testing::recurrent_kernel_shapes(): o at the dtype's tolerance (bf16: one
// rounding of o), ht at f32's (its arithmetic is f32 in both dtypes); the in-place update (ht = h0)
// gives the same bits as a separate ht.
std::vector<Param> recurrent_params() {
  std::vector<Param> params;
  for (GlaMixer m : ops::gla_mixers()) {
    for (size_t c = 0; c < testing::recurrent_kernel_shapes().size(); ++c) {
      for (DType dtype : {DType::f32, DType::bf16}) params.push_back({m, c, dtype});
    }
  }
  return params;
}

std::string recurrent_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(ops::gla_mixer_name(info.param.mixer)) + "_" +
         testing::recurrent_kernel_shapes()[info.param.case_index].name + "_" +
         std::string(dtype_name(info.param.dtype));
}

class GpuGlaRecurrent : public testing::GpuTest, public ::testing::WithParamInterface<Param> {};

TEST_P(GpuGlaRecurrent, MatchesCpuRecurrentInF64) {
  const Param prm = GetParam();
  const GlaProblem host =
      representable(testing::make_gla_problem(prm.mixer, testing::recurrent_kernel_shapes()[prm.case_index].shape, 1.0,
                                              301 + prm.case_index),
                    prm.dtype);
  const GlaResult ref = testing::run_forward(GlaImpl::recurrent, host);
  testing::expect_recurrent_forward(
      on_device(host, prm.dtype), ref, prm.dtype,
      [](auto& p, Tensor& o, Tensor& ht) { ops::gla_forward(GlaImpl::recurrent, p.spec, p.seqs, p.in, o, ht); },
      worst->worst[std::string(ops::gla_mixer_name(prm.mixer)) + "/" + std::string(dtype_name(prm.dtype)) +
                   "/recurrent"]);
}

INSTANTIATE_TEST_SUITE_P(Mixers, GpuGlaRecurrent, ::testing::ValuesIn(recurrent_params()), recurrent_name);

class GpuGlaContract : public testing::GpuTest {};

TEST_F(GpuGlaContract, BackwardRepeatsBitForBit) {
  for (GlaMixer m : ops::gla_mixers()) {
    const GlaProblem p = on_device(
        representable(testing::make_gla_problem(m, {{0, 15, 100, 300}, 2, 64, 64, true}, 1.0, 5), DType::bf16),
        DType::bf16);
    const auto run = [&] {
      ops::GlaGrads g = device_grads(p, DType::bf16);
      ops::gla_backward(GlaImpl::chunked, p.spec, p.seqs, p.in, p.d_o, p.dht, g);
      std::vector<Tensor> out;
      for (const Tensor* t : {&g.dq, &g.dk, &g.dv, &g.dg, &g.du, &g.dh0}) {
        if (t->defined()) out.push_back(t->clone());
      }
      return out;
    };
    const std::vector<Tensor> first = run(), second = run();
    ASSERT_EQ(first.size(), second.size());
    for (size_t i = 0; i < first.size(); ++i) {
      EXPECT_EQ(0, std::memcmp(first[i].raw(), second[i].raw(), first[i].nbytes()))
          << ops::gla_mixer_name(m) << " gradient " << i;
    }
  }
}

// What the forward saves is what the backward would recompute, by the same kernels: a backward from
// it gives the same bits, for every mixer on the bf16 pipeline, on whole sequences (K = 256 among
// them) and on segments (a sequence of 130 chunks on a grid of two blocks).
TEST_F(GpuGlaContract, BackwardFromSavedEqualsRecomputedBitForBit) {
  for (GlaMixer m : ops::gla_mixers()) {
    for (const testing::GlaShape& shape :
         {testing::GlaShape{{0, 15, 100, 300}, 2, 64, 64, true}, testing::GlaShape{{0, 200}, 2, 256, 128, true},
          testing::GlaShape{{0, 100, 8400}, 1, 64, 64, true}}) {
      if (!bf16_saves(m, shape)) continue;
      const GlaProblem p = representable(testing::make_gla_problem(m, shape, 1.0, 9), DType::bf16);
      EXPECT_GT(ops::gla_saved_bytes(p.spec, p.seqs, on_device(p, DType::bf16).in), 0u) << ops::gla_mixer_name(m);
      const auto recomputed = run_on_device(p, DType::bf16, false).named();
      const auto from_saved = run_on_device(p, DType::bf16, true).named();
      testing::expect_same_bits(recomputed, from_saved,
                                std::string(ops::gla_mixer_name(m)) + " T=" + std::to_string(shape.cu_seqlens.back()));
    }
  }
}

// Which calls save: every bf16 case of bf16_saves, and none of the others (f32; K or V not a
// multiple of 8).
TEST_F(GpuGlaContract, SavedBytes) {
  for (GlaMixer m : ops::gla_mixers()) {
    for (const Case& c : cases()) {
      const GlaProblem host = testing::make_gla_problem(m, c.shape, 1.0, 13);
      const GlaProblem f = on_device(representable(host, DType::f32), DType::f32);
      EXPECT_EQ(0u, ops::gla_saved_bytes(f.spec, f.seqs, f.in)) << ops::gla_mixer_name(m) << " " << c.shape_name;
      const GlaProblem b = on_device(representable(host, DType::bf16), DType::bf16);
      EXPECT_EQ(bf16_saves(m, c.shape), ops::gla_saved_bytes(b.spec, b.seqs, b.in) > 0)
          << ops::gla_mixer_name(m) << " " << c.shape_name;
    }
  }
}

// Runs `fn`, expecting std::invalid_argument whose message holds `needle`.
template <class Fn>
void expect_rejected(Fn&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "accepted; expected an error with '" << needle << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// A call that saves nothing (f32; bf16 with K and V not multiples of 8; the recurrent forward)
// refuses a saved buffer by name, and so does a call given one too small.
TEST_F(GpuGlaContract, SavedIsRefusedWhereNothingIsSaved) {
  const testing::GlaShape shape{{0, 70}, 2, 64, 64, true};
  const Tensor saved = Tensor::empty({1024}, DType::bf16, Device::cuda);
  const GlaProblem host = testing::make_gla_problem(GlaMixer::gla, shape, 1.0, 3);
  const GlaProblem f = on_device(representable(host, DType::f32), DType::f32);
  Tensor o = Tensor::empty(f.d_o.shape(), DType::f32, Device::cuda);
  expect_rejected([&] { ops::gla_forward(GlaImpl::chunked, f.spec, f.seqs, f.in, o, Tensor(), saved); },
                  "gla_forward: saved: this call saves nothing (gla_saved_bytes = 0)");
  ops::GlaGrads fg = device_grads(f, DType::f32);
  expect_rejected([&] { ops::gla_backward(GlaImpl::chunked, f.spec, f.seqs, f.in, f.d_o, f.dht, fg, saved); },
                  "gla_backward: saved: this call saves nothing");

  const testing::GlaShape odd{{0, 70}, 2, 36, 20, true};
  const GlaProblem narrow =
      on_device(representable(testing::make_gla_problem(GlaMixer::rwkv6, odd, 1.0, 4), DType::bf16), DType::bf16);
  EXPECT_EQ(0u, ops::gla_saved_bytes(narrow.spec, narrow.seqs, narrow.in));
  Tensor on = Tensor::empty(narrow.d_o.shape(), DType::bf16, Device::cuda);
  expect_rejected([&] { ops::gla_forward(GlaImpl::chunked, narrow.spec, narrow.seqs, narrow.in, on, Tensor(), saved); },
                  "saved: this call saves nothing");
  Tensor ob = Tensor::empty(f.d_o.shape(), DType::bf16, Device::cuda);

  const GlaProblem b = on_device(representable(host, DType::bf16), DType::bf16);
  const size_t bytes = ops::gla_saved_bytes(b.spec, b.seqs, b.in);
  ASSERT_GT(bytes, 0u);
  const Tensor small = Tensor::empty({static_cast<int64_t>(bytes / 4)}, DType::bf16, Device::cuda);
  expect_rejected([&] { ops::gla_forward(GlaImpl::chunked, b.spec, b.seqs, b.in, ob, Tensor(), small); },
                  "saved: expected at least " + std::to_string(bytes) + " bytes");
  const Tensor enough = saved_buffer(b);
  expect_rejected([&] { ops::gla_forward(GlaImpl::recurrent, b.spec, b.seqs, b.in, ob, Tensor(), enough); },
                  "the recurrent CUDA kernel saves nothing");
}

TEST_F(GpuGlaContract, RejectsBf16DecaysAndWideKeys) {
  const GlaProblem host =
      representable(testing::make_gla_problem(GlaMixer::gla, {{0, 70}, 2, 32, 16, true}, 1.0, 3), DType::bf16);
  GlaProblem p = on_device(host, DType::bf16);
  Tensor o = Tensor::empty(p.d_o.shape(), DType::bf16, Device::cuda);
  p.in.g = device(host.in.g, DType::bf16);
  expect_rejected([&] { ops::gla_forward(GlaImpl::chunked, p.spec, p.seqs, p.in, o, Tensor()); },
                  "gla_forward: g: expected f32");

  const GlaProblem wide =
      on_device(representable(testing::make_gla_problem(GlaMixer::gla, {{0, 8}, 1, 264, 8, true}, 1.0, 4), DType::f32),
                DType::f32);
  Tensor o_wide = Tensor::empty(wide.d_o.shape(), DType::f32, Device::cuda);
  expect_rejected([&] { ops::gla_forward(GlaImpl::chunked, wide.spec, wide.seqs, wide.in, o_wide, Tensor()); },
                  "the CUDA kernels take K ≤ 256");
}

}  // namespace
}  // namespace linea
