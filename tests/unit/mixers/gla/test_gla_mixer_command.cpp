// `linea mixer` for the gated-linear-attention family and HGRN, run in-process on generated HDF5
// files with exactly the datasets of issue 16's table: OUT equals direct calls of the ops (f64 for
// recurrent, f32 for chunked) bit for bit, recurrent and chunked agree, packed (cu_seqlens) and
// batched layouts, and a dataset a mixer does not take (or lacks) is reported with nothing written.
// Where a CUDA device is visible, --impl cuda gives the chunked results to 1e-4 in f32, and with
// --dtype bf16 (the file's f32 inputs rounded to bf16 on the way in) the recurrent ones to 0.05.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/hdf5_file.h"
#include "kernels/device_memory.h"
#include "model/mixers/gla/gla_problem.h"
#include "model/mixers/hgrn/hgrn.h"
#include "tests/testing/kernel_test.h"
#include "tests/testing/mixers/gla_problem.h"
#include "tests/testing/run_command.h"

namespace linea {
namespace {

namespace fs = std::filesystem;
using Datasets = std::map<std::string, Tensor>;

class GlaMixerCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("linea-gla-mixer-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes IN, runs the command (--dtype `dtype` when not empty); returns OUT's datasets.
  Datasets run(const std::string& mixer, const Datasets& in, const std::string& impl, const std::string& dtype = "") {
    const std::string tag = mixer + "-" + impl + dtype;
    const fs::path in_path = dir_ / (tag + "-in.h5"), out_path = dir_ / (tag + ".h5");
    Hdf5File file = Hdf5File::create(in_path, Hdf5File::Create::truncate);
    for (const auto& [name, t] : in) file.write(name, t);
    file.close();
    std::vector<std::string> args = {"--mixer", mixer, "--impl", impl, "--in", in_path, "--out", out_path};
    if (!dtype.empty()) args.insert(args.end(), {"--dtype", dtype});
    ::testing::internal::CaptureStdout();
    const int rc = testing::run_command("mixer", args);
    ::testing::internal::GetCapturedStdout();
    EXPECT_EQ(rc, 0);
    const Hdf5File out = Hdf5File::open(out_path);
    EXPECT_EQ(out.string_attribute("", "mixer"), mixer);
    Datasets d;
    for (const std::string& name : out.dataset_names()) d[name] = out.read(name);
    return d;
  }

  // Expects the command to fail on IN with every needle in the message, and to write no OUT.
  void expect_rejected(const std::string& mixer, const Datasets& in, const std::vector<std::string>& args,
                       const std::vector<std::string>& needles) {
    const fs::path in_path = dir_ / "bad-in.h5", out_path = dir_ / "bad-out.h5";
    Hdf5File file = Hdf5File::create(in_path, Hdf5File::Create::truncate);
    for (const auto& [name, t] : in) file.write(name, t);
    file.close();
    std::vector<std::string> argv = {"--mixer", mixer, "--in", in_path, "--out", out_path};
    argv.insert(argv.end(), args.begin(), args.end());
    EXPECT_TRUE(testing::throws_invalid_argument([&] { testing::run_command("mixer", argv); }, needles));
    EXPECT_FALSE(fs::exists(out_path));
  }

  // --impl cuda against the CPU impls' OUT (recurrent, chunked), where a CUDA device is visible.
  void expect_cuda_agrees(const std::string& mixer, const Datasets& in, const Datasets& recurrent,
                          const Datasets& chunked) {
    if (!cuda_device_available()) return;
    const Datasets f32 = run(mixer, in, "cuda"), bf16 = run(mixer, in, "cuda", "bf16");
    ASSERT_EQ(f32.size(), chunked.size());
    ASSERT_EQ(bf16.size(), recurrent.size());
    for (const auto& [name, t] : chunked) {
      EXPECT_TRUE(testing::assert_close(mixer + " cuda f32 " + name, t, f32.at(name), 1e-4));
    }
    for (const auto& [name, t] : recurrent) {
      EXPECT_TRUE(testing::assert_close(mixer + " cuda bf16 " + name, t, bf16.at(name), 0.05));
    }
  }

  fs::path dir_;
};

// [N, ...] → [B, T, ...]
Tensor batched(const Tensor& t, int64_t batch, int64_t seq_len) {
  Shape shape{batch, seq_len};
  shape.insert(shape.end(), t.shape().begin() + 1, t.shape().end());
  return testing::to_f32(t).reshape(shape);
}

Tensor offsets(const SeqLayout& seqs) {
  Tensor t = Tensor::empty({static_cast<int64_t>(seqs.cu_seqlens.size())}, DType::i64);
  std::copy(seqs.cu_seqlens.begin(), seqs.cu_seqlens.end(), t.data<int64_t>());
  return t;
}

void expect_equal(const Datasets& want, const Datasets& got) {
  ASSERT_EQ(want.size(), got.size());
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    const Tensor& g = got.at(name);
    ASSERT_EQ(g.shape(), w.shape()) << name;
    EXPECT_EQ(std::memcmp(g.raw(), w.raw(), w.nbytes()), 0) << name << " differs from the direct call";
  }
}

struct Layout {
  std::vector<int64_t> cu_seqlens;
  bool packed;
};
const Layout kLayouts[] = {{{0, 15, 80, 150}, true}, {{0, 70, 140}, false}};

TEST_F(GlaMixerCommand, OutputsEqualDirectOpCalls) {
  for (ops::GlaMixer m : ops::gla_mixers()) {
    const std::string mixer(ops::gla_mixer_name(m));
    for (const Layout& layout : kLayouts) {
      SCOPED_TRACE(mixer + (layout.packed ? " packed" : " batched"));
      const int64_t batch = layout.packed ? 1 : 2, T = layout.packed ? 150 : 70;
      const testing::GlaProblem p32 =
          testing::cast_problem(testing::make_gla_problem(m, {layout.cu_seqlens, 2, 12, 10, true}, 4.0, 7), DType::f32);
      Datasets in = {{"q", batched(p32.in.q, batch, T)},
                     {"v", batched(p32.in.v, batch, T)},
                     {"h0", p32.in.h0},
                     {"do", batched(p32.d_o, batch, T)},
                     {"dht", p32.dht}};
      if (p32.in.k.defined()) in["k"] = batched(p32.in.k, batch, T);
      if (p32.spec.decay != ops::GlaDecay::head) in["g"] = batched(p32.in.g, batch, T);
      if (p32.in.u.defined()) in["u"] = p32.in.u;
      if (layout.packed) in["cu_seqlens"] = offsets(p32.seqs);
      Datasets results[2];
      for (const ops::GlaImpl impl : {ops::GlaImpl::recurrent, ops::GlaImpl::chunked}) {
        const bool recurrent = impl == ops::GlaImpl::recurrent;
        testing::GlaProblem p = testing::cast_problem(p32, recurrent ? DType::f64 : DType::f32);
        // RetNet's fixed decays come from no dataset: the command computes them in its dtype.
        if (p.spec.decay == ops::GlaDecay::head) p.in.g = ops::retnet_log_decays(2, 0, p.in.q.dtype());
        const testing::GlaResult r = testing::run_forward_backward(impl, p);
        Datasets want;
        for (const auto& [name, t] : r.named()) {
          const bool state = name == "ht" || name == "dh0" || name == "du";
          want[name] = state ? testing::to_f32(t) : batched(t, batch, T);
        }
        results[recurrent ? 0 : 1] = run(mixer, in, recurrent ? "recurrent" : "chunked");
        expect_equal(want, results[recurrent ? 0 : 1]);
      }
      for (const auto& [name, t] : results[0]) {
        EXPECT_TRUE(testing::assert_close(name, t, results[1].at(name), 1e-5, 0)) << "recurrent vs chunked";
      }
      expect_cuda_agrees(mixer, in, results[0], results[1]);
    }
  }
}

TEST_F(GlaMixerCommand, HgrnOutputsEqualDirectOpCalls) {
  Rng rng(9);
  const SeqLayout seqs{{0, 15, 80, 150}};
  const int64_t N = 150, D = 7, S = 3;
  const auto normal = [&](Shape shape) {
    Tensor t = Tensor::empty(std::move(shape), DType::f32);
    fill_normal(t, rng, 0, 1);
    return t;
  };
  Tensor g = normal({N, D});
  for (int64_t i = 0; i < g.numel(); ++i) g.data<float>()[i] = -std::log1p(std::exp(-g.data<float>()[i]));
  const ops::HgrnInputs in32{normal({N, D}), g, normal({S, D})};
  const Tensor d_o = normal({N, D}), dht = normal({S, D});
  const Datasets file = {{"x", in32.x.reshape({1, N, D})},
                         {"g", g.reshape({1, N, D})},
                         {"h0", in32.h0},
                         {"do", d_o.reshape({1, N, D})},
                         {"dht", dht},
                         {"cu_seqlens", offsets(seqs)}};
  Datasets results[2];
  for (const ops::HgrnImpl impl : {ops::HgrnImpl::recurrent, ops::HgrnImpl::chunked}) {
    const bool recurrent = impl == ops::HgrnImpl::recurrent;
    const DType dt = recurrent ? DType::f64 : DType::f32;
    const auto cast = [&](const Tensor& t) { return testing::as_dtype(testing::to_f64(t), dt); };
    const ops::HgrnInputs in{cast(in32.x), cast(in32.g), cast(in32.h0)};
    Tensor o = Tensor::empty({N, D}, dt), ht = Tensor::empty({S, D}, dt);
    ops::hgrn_forward(impl, seqs, in, o, ht);
    ops::HgrnGrads grads{Tensor::empty({N, D}, dt), Tensor::empty({N, D}, dt), Tensor::empty({S, D}, dt)};
    ops::hgrn_backward(impl, seqs, in, cast(d_o), cast(dht), grads);
    const Datasets want = {{"o", testing::to_f32(o).reshape({1, N, D})},
                           {"ht", testing::to_f32(ht)},
                           {"dx", testing::to_f32(grads.dx).reshape({1, N, D})},
                           {"dg", testing::to_f32(grads.dg).reshape({1, N, D})},
                           {"dh0", testing::to_f32(grads.dh0)}};
    results[recurrent ? 0 : 1] = run("hgrn", file, recurrent ? "recurrent" : "chunked");
    expect_equal(want, results[recurrent ? 0 : 1]);
  }
  expect_cuda_agrees("hgrn", file, results[0], results[1]);
}

TEST_F(GlaMixerCommand, DatasetsAMixerDoesNotTakeAreErrors) {
  const auto problem = [](ops::GlaMixer m) {
    return testing::cast_problem(testing::make_gla_problem(m, {{0, 9}, 2, 4, 3, false}, 1.0, 3), DType::f32);
  };
  const auto file = [&](const testing::GlaProblem& p) {
    Datasets d = {{"q", batched(p.in.q, 1, 9)}, {"v", batched(p.in.v, 1, 9)}};
    if (p.in.k.defined()) d["k"] = batched(p.in.k, 1, 9);
    if (p.spec.decay != ops::GlaDecay::head) d["g"] = batched(p.in.g, 1, 9);
    if (p.in.u.defined()) d["u"] = p.in.u;
    return d;
  };
  const testing::GlaProblem gla = problem(ops::GlaMixer::gla), rwkv6 = problem(ops::GlaMixer::rwkv6);
  Datasets hgrn2_with_k = file(problem(ops::GlaMixer::hgrn2));
  hgrn2_with_k["k"] = batched(gla.in.k, 1, 9);
  expect_rejected("hgrn2", hgrn2_with_k, {"--impl", "chunked"}, {"dataset 'k'", "tied to its decay"});
  Datasets retnet_with_g = file(problem(ops::GlaMixer::retnet));
  retnet_with_g["g"] = batched(gla.in.g, 1, 9);
  expect_rejected("retnet", retnet_with_g, {"--impl", "chunked"}, {"dataset 'g'", "fixed per head"});
  Datasets gla_with_u = file(gla);
  gla_with_u["u"] = rwkv6.in.u;
  expect_rejected("gla", gla_with_u, {"--impl", "recurrent"}, {"dataset 'u'", "only rwkv6"});
  Datasets rwkv6_without_u = file(rwkv6);
  rwkv6_without_u.erase("u");
  expect_rejected("rwkv6", rwkv6_without_u, {"--impl", "chunked"}, {"dataset 'u'", "missing; rwkv6 needs"});
  Datasets mamba2_channel_g = file(problem(ops::GlaMixer::mamba2));
  mamba2_channel_g["g"] = batched(gla.in.g, 1, 9);
  expect_rejected("mamba2", mamba2_channel_g, {"--impl", "chunked"},
                  {"dataset 'g'", "[B, T, H], one log decay per head"});
  Datasets positive_g = file(gla);
  positive_g["g"].data<float>()[5] = 0.5f;
  expect_rejected("gla", positive_g, {"--impl", "chunked"}, {"dataset 'g'", "log decays must be finite and ≤ 0"});
}

}  // namespace
}  // namespace linea
