// The CUDA delta rule (model/mixers/delta_rule/cuda/delta_rule.h) against the CPU op in f64 on the same inputs: o,
// ht and every gradient, for DeltaNet, GDN, KDA and GDN-2, in f32 and bf16 (token operands; g, h0,
// dht always f32), with fla's thresholds (reference/mixers.md §3.3). Shapes: B=2 T=75 K=V=64 with
// h0 and dht under fla's gate normalizers {0.1, 1, 10}; T=130 K=V=128; packed documents
// cu_seqlens [0, 15, 100, 300] (normalizers 1 and 0.01, g ≈ −70 per token); the 340M model's heads
// (K=256, V=512, 2 heads, T=200); odd K and V (K=36 V=20, K=33 V=19); packed shapes with 144 and
// 80 (sequence, head) pairs (the state passes' value tiles 64 and 32, with tails); a sequence of
// 8300 tokens beside one of 100 (the bf16 pipeline's segments of 64 chunks). Also: the
// backward repeats bit for bit, and the recurrent backward, a recurrent forward with r or a bf16
// g on CUDA is rejected by name. The recurrent forward (decoding's one-token kernel) against the
// CPU recurrent op: see GpuDeltaRuleRecurrent below.
// The write error r (reference/mixers.md §5.1) and every gradient with its upstream dr, on the
// shapes with h0, odd lengths, packed documents, odd K and V, both value tiles and K = 256, at
// the f32 pipeline's limits (tests/gpu/gpu_test.h: f32 1e-5, bf16 5e-3; dg 0.02 in bf16): a call
// with r runs the f32 pipeline, bf16 ones on f32 copies. The largest err_ratio per mixer, dtype
// and tensor is printed at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "model/mixers/delta_rule/delta_rule.h"
#include "tests/gpu/gpu_test.h"
#include "tests/testing/mixers/delta_rule_problem.h"

namespace linea {
namespace {

using ops::DeltaRuleImpl;
using testing::DeltaRuleProblem;
using testing::DeltaRuleResult;

// fla's thresholds for the chunked kernels (reference/mixers.md §3.3).
double fla_tolerance(const std::string& tensor) {
  if (tensor == "o" || tensor == "ht") return 0.005;
  if (tensor == "dbeta" || tensor == "dg") return 0.02;
  if (tensor == "db" || tensor == "dw") return 0.01;
  return 0.008;  // dq, dk, dv, dh0
}

struct WorstErrRatios : ::testing::Environment {
  std::map<std::string, std::map<std::string, double>> worst;  // [mixer/dtype][tensor]
  void TearDown() override {
    for (const auto& [run, tensors] : worst) {
      std::cout << "[cuda delta-rule err_ratio] " << run << ":";
      for (const auto& [tensor, ratio] : tensors) std::cout << " " << tensor << " " << ratio;
      std::cout << "\n";
    }
  }
};
WorstErrRatios* const worst = static_cast<WorstErrRatios*>(::testing::AddGlobalTestEnvironment(new WorstErrRatios));

// Token operands representable in `dtype`, the f32 ones (g, h0, dht) in f32.
DeltaRuleProblem representable(const DeltaRuleProblem& p, DType dtype) {
  DeltaRuleProblem r = p;
  for (Tensor* t : {&r.in.q, &r.in.k, &r.in.v, &r.in.beta, &r.in.b, &r.in.w, &r.d_o, &r.dr}) {
    if (t->defined()) *t = testing::representable(*t, dtype);
  }
  for (Tensor* t : {&r.in.g, &r.in.h0, &r.dht}) {
    if (t->defined()) *t = testing::representable(*t, DType::f32);
  }
  return r;
}

using testing::device_empty;
Tensor device(const Tensor& host, DType dtype) { return testing::device_copy(host, dtype); }

// The problem on the device: token operands in `dtype`, g, h0 and dht in f32.
DeltaRuleProblem on_device(const DeltaRuleProblem& p, DType dtype) {
  DeltaRuleProblem d = p;
  for (Tensor* t : {&d.in.q, &d.in.k, &d.in.v, &d.in.beta, &d.in.b, &d.in.w, &d.d_o, &d.dr}) *t = device(*t, dtype);
  for (Tensor* t : {&d.in.g, &d.in.h0, &d.dht}) *t = device(*t, DType::f32);
  return d;
}

// The buffer a forward saves its intermediates into for the backward (ops::delta_rule_saved_bytes),
// undefined for a call that saves none.
Tensor saved_buffer(const DeltaRuleProblem& p) {
  const size_t bytes = ops::delta_rule_saved_bytes(p.spec, p.seqs, p.in);
  return bytes ? Tensor::empty({static_cast<int64_t>((bytes + 1) / 2)}, DType::bf16, Device::cuda) : Tensor();
}

// Forward and backward on the device (the backward from what the forward saved, with `save`; the
// write error r and its gradient dr where the problem has dr); results as f64 host tensors.
DeltaRuleResult run_on_device(const DeltaRuleProblem& host, DType dtype, bool save = false) {
  const DeltaRuleProblem p = on_device(host, dtype);
  const Tensor saved = save ? saved_buffer(p) : Tensor();
  DeltaRuleResult r;
  r.o = device_empty(p.d_o, dtype);
  r.ht = device_empty(p.dht, DType::f32);
  r.r = device_empty(p.dr, dtype);
  ops::delta_rule_forward(DeltaRuleImpl::chunked, p.spec, p.seqs, p.in, r.o, r.ht, r.r, saved);
  r.grads = {device_empty(p.in.q, dtype),      device_empty(p.in.k, dtype),    device_empty(p.in.v, dtype),
             device_empty(p.in.beta, dtype),   device_empty(p.in.b, dtype),    device_empty(p.in.w, dtype),
             device_empty(p.in.g, DType::f32), device_empty(p.dht, DType::f32)};
  ops::delta_rule_backward(DeltaRuleImpl::chunked, p.spec, p.seqs, p.in, p.d_o, p.dht, r.grads, p.dr, saved);
  DeltaRuleResult h;
  h.o = testing::to_host(r.o);
  h.ht = testing::to_host(r.ht);
  if (r.r.defined()) h.r = testing::to_host(r.r);
  ops::DeltaRuleGrads& g = h.grads;
  for (auto [to, from] : {std::pair{&g.dq, &r.grads.dq},
                          {&g.dk, &r.grads.dk},
                          {&g.dv, &r.grads.dv},
                          {&g.dbeta, &r.grads.dbeta},
                          {&g.db, &r.grads.db},
                          {&g.dw, &r.grads.dw},
                          {&g.dg, &r.grads.dg},
                          {&g.dh0, &r.grads.dh0}}) {
    if (from->defined()) *to = testing::to_host(*from);
  }
  return h;
}

struct Case {
  const char* shape_name;
  testing::DeltaRuleShape shape;
  double normalizer;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = [] {
    std::vector<Case> c;
    for (double n : {0.1, 1.0, 10.0}) c.push_back({"B2_T75_H2_K64_V64", {{0, 75, 150}, 2, 64, 64, true}, n});
    c.push_back({"B1_T130_H2_K128_V128", {{0, 130}, 2, 128, 128, true}, 1.0});
    for (double n : {1.0, 0.01}) c.push_back({"packed_15_100_300_H2_K64_V64", {{0, 15, 100, 300}, 2, 64, 64, true}, n});
    c.push_back({"model_T200_H2_K256_V512", {{0, 200}, 2, 256, 512, true}, 1.0});
    // The state passes' edge paths: K not a multiple of 32 (or of 4: 4-byte copies) and V not a
    // multiple of the value tile (a tail tile; bf16 dO rows not 16-byte aligned: plain loads).
    c.push_back({"T70_H3_K36_V20", {{0, 70}, 3, 36, 20, true}, 1.0});
    c.push_back({"T70_H1_K33_V19", {{0, 70}, 1, 33, 19, true}, 1.0});
    // Enough (sequence, head) pairs that the host picks the value tiles 64 (144 pairs) and 32
    // (80 pairs) on a device of 132 multiprocessors, each with a tail tile.
    c.push_back(
        {"tile64_packed9_H16_K64_V80", {{0, 40, 75, 140, 150, 200, 265, 300, 330, 400}, 16, 64, 80, true}, 1.0});
    c.push_back({"tile32_packed5_H16_K64_V48", {{0, 64, 100, 180, 181, 250}, 16, 64, 48, true}, 1.0});
    // A sequence of 130 chunks beside a short one, on a grid of two blocks: the bf16 state passes
    // run by segments of 64 chunks (3 and 1), joined by their transitions.
    c.push_back({"segments_packed_100_8400_H1_K64_V64", {{0, 100, 8400}, 1, 64, 64, true}, 1.0});
    return c;
  }();
  return all;
}

// save: the backward runs from what the forward saved (bf16 only: the f32 path saves nothing).
struct Param {
  DeltaRulePreset mixer;
  size_t case_index;
  DType dtype;
  bool save;
};

std::vector<Param> all_params() {
  std::vector<Param> params;
  for (const DeltaRulePreset& m : testing::named_mixers()) {
    for (size_t c = 0; c < cases().size(); ++c) {
      if (m.decay == ops::DecayKind::none && cases()[c].normalizer != 1.0) continue;  // no decay to normalise
      params.push_back({m, c, DType::f32, false});
      for (bool save : {false, true}) params.push_back({m, c, DType::bf16, save});
    }
  }
  return params;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const Case& c = cases()[info.param.case_index];
  return std::string(info.param.mixer.name) + "_" + c.shape_name + "_norm" + testing::name_number(c.normalizer) + "_" +
         std::string(dtype_name(info.param.dtype)) + (info.param.save ? "_saved" : "");
}

class GpuDeltaRule : public testing::GpuTest, public ::testing::WithParamInterface<Param> {};

TEST_P(GpuDeltaRule, MatchesCpuInF64) {
  const Param prm = GetParam();
  const Case& c = cases()[prm.case_index];
  const DeltaRuleProblem p = representable(
      testing::make_delta_rule_problem(prm.mixer.decay, prm.mixer.gate, c.shape, c.normalizer, 77 + prm.case_index),
      prm.dtype);
  const auto ref = testing::run_forward_backward(DeltaRuleImpl::chunked, p).named();
  const auto got = run_on_device(p, prm.dtype, prm.save).named();
  ASSERT_EQ(ref.size(), got.size());
  auto& w = worst->worst[std::string(prm.mixer.name) + "/" + std::string(dtype_name(prm.dtype))];
  for (size_t i = 0; i < ref.size(); ++i) {
    const std::string& name = ref[i].first;
    ASSERT_EQ(name, got[i].first);
    // atol 0: fla's 1e-6 absolute pass would hide relative errors of tiny tensors (dg under strong decay).
    EXPECT_TRUE(testing::assert_close(name, ref[i].second, got[i].second, fla_tolerance(name), 0));
    w[name] = std::max(w[name], testing::compare(ref[i].second, got[i].second).err_ratio);
  }
}

INSTANTIATE_TEST_SUITE_P(Mixers, GpuDeltaRule, ::testing::ValuesIn(all_params()), param_name);

// The write error's limits: those of the f32 pipeline (bf16: its results rounded once).
double write_error_tolerance(const std::string& tensor, DType dtype) {
  if (dtype == DType::bf16 && tensor == "dg") return 0.02;
  return testing::tolerance(dtype);
}

// The cases() above with h0 and a gate normalizer of 1 (the state passes' extra phase for dR meets
// every tiling; the bf16 pipeline's segments do not enter: a call with r never takes it).
std::vector<Param> write_error_params() {
  std::vector<Param> params;
  for (const DeltaRulePreset& m : testing::named_mixers()) {
    for (size_t c = 0; c < cases().size(); ++c) {
      if (cases()[c].normalizer != 1.0 || cases()[c].shape.cu_seqlens.back() > 1000) continue;
      for (DType dtype : {DType::f32, DType::bf16}) params.push_back({m, c, dtype, false});
    }
  }
  return params;
}

class GpuDeltaRuleWriteError : public testing::GpuTest, public ::testing::WithParamInterface<Param> {};

TEST_P(GpuDeltaRuleWriteError, MatchesCpuInF64) {
  const Param prm = GetParam();
  const Case& c = cases()[prm.case_index];
  const DeltaRuleProblem p = representable(
      testing::with_write_error(
          testing::make_delta_rule_problem(prm.mixer.decay, prm.mixer.gate, c.shape, c.normalizer, 91 + prm.case_index),
          191 + prm.case_index),
      prm.dtype);
  const auto ref = testing::run_forward_backward(DeltaRuleImpl::chunked, p).named();
  const auto got = run_on_device(p, prm.dtype).named();
  ASSERT_EQ(ref.size(), got.size());
  auto& w = worst->worst[std::string(prm.mixer.name) + "/" + std::string(dtype_name(prm.dtype)) + "/write_error"];
  for (size_t i = 0; i < ref.size(); ++i) {
    const std::string& name = ref[i].first;
    ASSERT_EQ(name, got[i].first);
    EXPECT_TRUE(testing::assert_close(name, ref[i].second, got[i].second, write_error_tolerance(name, prm.dtype), 0));
    w[name] = std::max(w[name], testing::compare(ref[i].second, got[i].second).err_ratio);
  }
}

INSTANTIATE_TEST_SUITE_P(Mixers, GpuDeltaRuleWriteError, ::testing::ValuesIn(write_error_params()), param_name);

class GpuDeltaRuleContract : public testing::GpuTest {};

TEST_F(GpuDeltaRuleContract, BackwardRepeatsBitForBit) {
  const DeltaRuleProblem p =
      on_device(representable(testing::make_delta_rule_problem(ops::DecayKind::channel, ops::GateKind::erase_write,
                                                               {{0, 15, 100, 300}, 2, 64, 64, true}, 1.0, 5),
                              DType::bf16),
                DType::bf16);
  auto run = [&] {
    ops::DeltaRuleGrads g{device_empty(p.in.q, DType::bf16), device_empty(p.in.k, DType::bf16),
                          device_empty(p.in.v, DType::bf16), Tensor(),
                          device_empty(p.in.b, DType::bf16), device_empty(p.in.w, DType::bf16),
                          device_empty(p.in.g, DType::f32),  device_empty(p.dht, DType::f32)};
    ops::delta_rule_backward(DeltaRuleImpl::chunked, p.spec, p.seqs, p.in, p.d_o, p.dht, g);
    return std::vector<Tensor>{g.dq.clone(), g.dk.clone(), g.dv.clone(), g.db.clone(),
                               g.dw.clone(), g.dg.clone(), g.dh0.clone()};
  };
  const std::vector<Tensor> first = run(), second = run();
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(first[i].raw(), second[i].raw(), first[i].nbytes())) << "gradient " << i;
  }
}

// What the forward saves is what the backward would recompute, by the same kernels: a backward
// from it gives the same bits, for every mixer, on whole sequences and on segments.
TEST_F(GpuDeltaRuleContract, BackwardFromSavedEqualsRecomputedBitForBit) {
  for (const DeltaRulePreset& m : testing::named_mixers()) {
    for (const testing::DeltaRuleShape& shape : {testing::DeltaRuleShape{{0, 15, 100, 300}, 2, 64, 64, true},
                                                 testing::DeltaRuleShape{{0, 200}, 2, 256, 512, true},
                                                 testing::DeltaRuleShape{{0, 100, 8400}, 1, 64, 64, true}}) {
      const DeltaRuleProblem p =
          representable(testing::make_delta_rule_problem(m.decay, m.gate, shape, 1.0, 9), DType::bf16);
      EXPECT_GT(ops::delta_rule_saved_bytes(p.spec, p.seqs, on_device(p, DType::bf16).in), 0u) << m.name;
      const auto recomputed = run_on_device(p, DType::bf16, false).named();
      const auto from_saved = run_on_device(p, DType::bf16, true).named();
      testing::expect_same_bits(recomputed, from_saved,
                                std::string(m.name) + " T=" + std::to_string(shape.cu_seqlens.back()));
    }
  }
}

TEST_F(GpuDeltaRuleContract, SavedIsRefusedWhereNothingIsSaved) {
  const DeltaRuleProblem host =
      testing::make_delta_rule_problem(ops::DecayKind::scalar, ops::GateKind::beta, {{0, 70}, 2, 64, 64, true}, 1.0, 3);
  const DeltaRuleProblem p = on_device(representable(host, DType::f32), DType::f32);
  EXPECT_EQ(0u, ops::delta_rule_saved_bytes(p.spec, p.seqs, p.in));
  Tensor o = Tensor::empty(p.d_o.shape(), DType::f32, Device::cuda);
  const Tensor saved = Tensor::empty({1024}, DType::bf16, Device::cuda);
  try {
    ops::delta_rule_forward(DeltaRuleImpl::chunked, p.spec, p.seqs, p.in, o, Tensor(), Tensor(), saved);
    ADD_FAILURE() << "an f32 call took a saved buffer";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("saved: this call saves nothing"), std::string::npos) << e.what();
  }
  const DeltaRuleProblem b = on_device(representable(host, DType::bf16), DType::bf16);
  const size_t bytes = ops::delta_rule_saved_bytes(b.spec, b.seqs, b.in);
  ASSERT_GT(bytes, 0u);
  Tensor ob = Tensor::empty(b.d_o.shape(), DType::bf16, Device::cuda);
  const Tensor small = Tensor::empty({static_cast<int64_t>(bytes / 4)}, DType::bf16, Device::cuda);
  try {
    ops::delta_rule_forward(DeltaRuleImpl::chunked, b.spec, b.seqs, b.in, ob, Tensor(), Tensor(), small);
    ADD_FAILURE() << "a saved buffer of half the size was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("saved: expected at least " + std::to_string(bytes) + " bytes"),
              std::string::npos)
        << e.what();
  }
  // A call with the write error runs the f32 pipeline, which saves nothing.
  const Tensor enough = saved_buffer(b);
  Tensor r = Tensor::empty(b.d_o.shape(), DType::bf16, Device::cuda);
  try {
    ops::delta_rule_forward(DeltaRuleImpl::chunked, b.spec, b.seqs, b.in, ob, Tensor(), r, enough);
    ADD_FAILURE() << "a call with the write error took a saved buffer";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("without the write error r or dr"), std::string::npos) << e.what();
  }
}

TEST_F(GpuDeltaRuleContract, RecurrentBackwardWriteErrorAndBf16DecayAreRejected) {
  const DeltaRuleProblem host =
      testing::make_delta_rule_problem(ops::DecayKind::scalar, ops::GateKind::beta, {{0, 10}, 1, 8, 8, true}, 1.0, 6);
  DeltaRuleProblem p = on_device(representable(host, DType::f32), DType::f32);
  Tensor o = Tensor::empty(p.d_o.shape(), DType::f32, Device::cuda);
  const auto expect_message = [&](const std::function<void()>& call, const std::string& message) {
    try {
      call();
      ADD_FAILURE() << "no error; expected '" << message << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  expect_message(
      [&] {
        ops::DeltaRuleGrads g{device_empty(p.in.q, DType::f32),
                              device_empty(p.in.k, DType::f32),
                              device_empty(p.in.v, DType::f32),
                              device_empty(p.in.beta, DType::f32),
                              Tensor(),
                              Tensor(),
                              device_empty(p.in.g, DType::f32),
                              Tensor()};
        ops::delta_rule_backward(DeltaRuleImpl::recurrent, p.spec, p.seqs, p.in, o, Tensor(), g);
      },
      "delta_rule_backward: impl: the recurrent backward has no CUDA implementation; use chunked");
  expect_message(
      [&] {
        ops::delta_rule_forward(DeltaRuleImpl::recurrent, p.spec, p.seqs, p.in, o, Tensor(),
                                Tensor::empty(o.shape(), DType::f32, Device::cuda));
      },
      "delta_rule_forward: r: the recurrent CUDA kernel does not form the write error; use chunked");
  p.in.g = device(host.in.g, DType::bf16);
  expect_message([&] { ops::delta_rule_forward(DeltaRuleImpl::chunked, p.spec, p.seqs, p.in, o, Tensor()); },
                 "g: expected f32, got bf16");
}

// ---- The recurrent forward on CUDA (delta_rule_recurrent.cu: decoding's one-token step) against
// the CPU recurrent op in f64, on testing::recurrent_kernel_shapes(): o at the dtype's tolerance
// (bf16: one rounding of o), ht at f32's (its arithmetic is f32 in both dtypes); and the in-place
// update (ht = h0) gives the same bits as a separate ht.
struct RecurrentParam {
  DeltaRulePreset mixer;
  size_t shape_index;
  DType dtype;
};

std::vector<RecurrentParam> recurrent_params() {
  std::vector<RecurrentParam> params;
  for (const DeltaRulePreset& m : testing::named_mixers()) {
    for (size_t c = 0; c < testing::recurrent_kernel_shapes().size(); ++c) {
      for (DType dtype : {DType::f32, DType::bf16}) params.push_back({m, c, dtype});
    }
  }
  return params;
}

std::string recurrent_name(const ::testing::TestParamInfo<RecurrentParam>& info) {
  return std::string(info.param.mixer.name) + "_" + testing::recurrent_kernel_shapes()[info.param.shape_index].name +
         "_" + std::string(dtype_name(info.param.dtype));
}

class GpuDeltaRuleRecurrent : public testing::GpuTest, public ::testing::WithParamInterface<RecurrentParam> {};

TEST_P(GpuDeltaRuleRecurrent, MatchesCpuRecurrentInF64) {
  const RecurrentParam prm = GetParam();
  const DeltaRuleProblem host =
      representable(testing::make_delta_rule_problem(prm.mixer.decay, prm.mixer.gate,
                                                     testing::recurrent_kernel_shapes()[prm.shape_index].shape, 1.0,
                                                     301 + prm.shape_index),
                    prm.dtype);
  const DeltaRuleResult ref = testing::run_forward(DeltaRuleImpl::recurrent, host);
  testing::expect_recurrent_forward(
      on_device(host, prm.dtype), ref, prm.dtype,
      [](auto& p, Tensor& o, Tensor& ht) {
        ops::delta_rule_forward(DeltaRuleImpl::recurrent, p.spec, p.seqs, p.in, o, ht);
      },
      worst->worst[std::string(prm.mixer.name) + "/" + std::string(dtype_name(prm.dtype)) + "/recurrent"]);
}

INSTANTIATE_TEST_SUITE_P(Mixers, GpuDeltaRuleRecurrent, ::testing::ValuesIn(recurrent_params()), recurrent_name);

}  // namespace
}  // namespace linea
