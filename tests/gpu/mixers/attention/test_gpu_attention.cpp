// CUDA causal softmax attention against the CPU op in f64 on the same inputs: out, lse, dq, dk, dv
// for GQA (8 query heads over 2 kv heads) and plain heads, windows 0 (unlimited), 37, 100 and 300,
// packed sequences (an empty one included) whose lengths are not multiples of the kernels' tiles,
// dense batches of equal sequences, head dims 32, 64 and 128, on both CUDA backends: the own flash
// kernels in f32 and bf16, cuDNN's fused attention in bf16 (it takes no f32; its dense and ragged
// layouts both appear), with autotuning (the plan timed fastest of the heuristics' candidates, on
// the first call of each shape, whose result must survive the timing runs) and without it (the
// heuristics' first). The backward runs on the device's own out and lse, as in training. Also:
// cudnn_autotune = false runs the heuristics' first plan and autotuning one of the candidates;
// the own kernels give bit-identical results run to run; `auto` falls back to the own kernels for
// what cuDNN refuses (f32) and says why, `cudnn` refuses it with an error; an unsupported head dim
// is a clear error; without a device, cuDNN accepts and compiles every graph for an H200
// (CudnnAttentionGraphs). Every comparison prints its err_ratio and max abs error (with window 1 every
// query sees only itself: dq = dk = 0 exactly, and the device's rounding noise passes by abs_err ≤ 1e-6).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "model/mixers/attention/attention.h"
#include "model/mixers/attention/cuda/attention_routing.h"
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
class GpuAttentionCudnn : public testing::GpuTest {};

using ops::AttentionBackend;

struct Case {
  SeqLayout seqs;
  int64_t q_heads, kv_heads, head_dim, window;

  ops::AttentionShape shape(AttentionBackend backend = AttentionBackend::own, bool autotune = true) const {
    return {.q_heads = q_heads,
            .kv_heads = kv_heads,
            .head_dim = head_dim,
            .window = window,
            .scale = 1.0 / std::sqrt(static_cast<double>(head_dim)),
            .backend = backend,
            .cudnn_autotune = autotune};
  }
  std::string name() const {
    std::string s = "seqs [";
    for (size_t i = 0; i < seqs.cu_seqlens.size(); ++i) {
      if (i) s += ",";
      s += std::to_string(seqs.cu_seqlens[i]);
    }
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

// The device results, left on the device; `routes` (if given) gets what served the forward and the
// backward.
Results run_gpu(const Case& c, const Inputs& in, DType dt, AttentionBackend backend = AttentionBackend::own,
                bool autotune = true, cuda::AttentionRoute* routes = nullptr) {
  const int64_t n = c.seqs.num_tokens();
  const Tensor q = to_device(in.q, dt), k = to_device(in.k, dt), v = to_device(in.v, dt);
  auto empty = [&](const Tensor& like) { return Tensor::empty(like.shape(), dt, Device::cuda); };
  Results r{empty(in.q), Tensor::empty({n, c.q_heads}, kStatistics, Device::cuda), empty(in.q), empty(in.k),
            empty(in.v)};
  const ops::AttentionShape shape = c.shape(backend, autotune);
  ops::attention_forward(r.out, r.lse, q, k, v, shape, c.seqs);
  if (routes) routes[0] = cuda::last_attention_route();
  ops::attention_backward(r.dq, r.dk, r.dv, to_device(in.dout, dt), q, k, v, r.out, r.lse, shape, c.seqs);
  if (routes) routes[1] = cuda::last_attention_route();
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
          {SeqLayout{{0, 1, 2, 131}}, 2, 1, 64, 1},
          {SeqLayout::uniform(2, 256), 4, 4, 128, 0},
          {SeqLayout::uniform(2, 256), 8, 2, 64, 100}};
}

// Every case on `backend` in dtype `dt` against the CPU reference (cuDNN autotuning as `autotune`
// says).
void expect_cases_match_cpu(DType dt, AttentionBackend backend, const char* label, bool autotune = true) {
  Rng rng(11);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name());
    const Inputs in = make_inputs(c, dt, rng);
    const Results ref = run_cpu(c, in), got = run_gpu(c, in, dt, backend, autotune);
    for (const Named& o : kOutputs) {
      const Tensor device = to_host(got.*o.member);
      const testing::CloseReport report = testing::compare(ref.*o.member, device);
      std::printf("[attention %s %s] %-44s %-3s err_ratio %.3g abs_err %.3g\n", label,
                  std::string(dtype_name(dt)).c_str(), c.name().c_str(), o.name, report.err_ratio, report.abs_err);
      EXPECT_TRUE(assert_close(o.name, ref.*o.member, device, tolerance(dt)));
    }
  }
}

// Whether this build has cuDNN: a call with backend = cudnn says so when it has not.
bool built_with_cudnn() {
  const Case c{SeqLayout{{0, 128}}, 1, 1, 64, 0};
  Tensor x = Tensor::zeros({128, 64}, DType::bf16, Device::cuda);
  Tensor out = Tensor::empty({128, 64}, DType::bf16, Device::cuda);
  Tensor lse = Tensor::empty({128, 1}, kStatistics, Device::cuda);
  try {
    ops::attention_forward(out, lse, x, x, x, c.shape(AttentionBackend::cudnn), c.seqs);
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).find("built without cuDNN") != std::string::npos) return false;
    throw;
  }
  return true;
}

TEST_P(GpuAttention, OwnKernelsMatchCpu) { expect_cases_match_cpu(GetParam(), AttentionBackend::own, "own"); }

// Autotuned (the default): each case's shape is new, so its first call times the candidates on
// the very tensors whose results are checked.
TEST_F(GpuAttentionCudnn, MatchesCpu) {
  if (!built_with_cudnn()) GTEST_SKIP() << "built without cuDNN";
  expect_cases_match_cpu(DType::bf16, AttentionBackend::cudnn, "cudnn");
}

TEST_F(GpuAttentionCudnn, MatchesCpuWithoutAutotuning) {
  if (!built_with_cudnn()) GTEST_SKIP() << "built without cuDNN";
  expect_cases_match_cpu(DType::bf16, AttentionBackend::cudnn, "cudnn heuristics' first", /*autotune=*/false);
}

// cudnn_autotune = false runs the heuristics' first plan (today's choice before autotuning), built
// afresh here for comparison; autotuning runs one of the candidates, which start with that plan,
// and keeps it on later calls of the shape. Forward and backward, dense and ragged.
TEST_F(GpuAttentionCudnn, AutotuneOffRunsTheHeuristicsChoice) {
  if (!built_with_cudnn()) GTEST_SKIP() << "built without cuDNN";
  const std::vector<Case> shapes = {{SeqLayout::uniform(2, 512), 4, 4, 128, 0},
                                    {SeqLayout{{0, 15, 100, 300, 700}}, 8, 2, 64, 37}};
  Rng rng(14);
  for (const Case& c : shapes) {
    SCOPED_TRACE(c.name());
    const Inputs in = make_inputs(c, DType::bf16, rng);
    cuda::AttentionRoute off[2], on[2], again[2];
    run_gpu(c, in, DType::bf16, AttentionBackend::cudnn, /*autotune=*/false, off);
    run_gpu(c, in, DType::bf16, AttentionBackend::cudnn, /*autotune=*/true, on);
    run_gpu(c, in, DType::bf16, AttentionBackend::cudnn, /*autotune=*/true, again);
    for (const bool backward : {false, true}) {
      const char* direction = backward ? "backward" : "forward";
      const std::vector<std::string> first =
          cuda::cudnn_attention_plan_candidates(backward, c.shape(AttentionBackend::cudnn, false), c.seqs);
      const std::vector<std::string> candidates =
          cuda::cudnn_attention_plan_candidates(backward, c.shape(AttentionBackend::cudnn, true), c.seqs);
      std::string listed;
      for (const std::string& name : candidates) listed += " [" + name + "]";
      std::printf("[attention cudnn autotune] %s %s: heuristics' first %s, candidates%s, autotuned %s\n",
                  c.name().c_str(), direction, first.empty() ? "none" : first[0].c_str(), listed.c_str(),
                  on[backward].plan.c_str());
      ASSERT_EQ(first.size(), 1u) << direction;
      ASSERT_FALSE(candidates.empty()) << direction;
      EXPECT_LE(candidates.size(), 8u) << direction;
      EXPECT_EQ(candidates[0], first[0]) << direction;
      EXPECT_TRUE(off[backward].cudnn && on[backward].cudnn && again[backward].cudnn) << direction;
      EXPECT_EQ(off[backward].plan, first[0]) << direction;
      EXPECT_NE(std::find(candidates.begin(), candidates.end(), on[backward].plan), candidates.end())
          << direction << ": " << on[backward].plan;
      EXPECT_EQ(again[backward].plan, on[backward].plan) << direction;
    }
  }
}

// f32 is what cuDNN's fused attention refuses: auto runs the own kernels (and matches the CPU),
// saying why; cudnn is an error that says why.
TEST_F(GpuAttentionCudnn, AutoFallsBackAndSaysWhy) {
  if (!built_with_cudnn()) GTEST_SKIP() << "built without cuDNN";
  const Case c{SeqLayout{{0, 15, 100, 300}}, 8, 2, 64, 37};
  Rng rng(13);
  const Inputs in = make_inputs(c, DType::f32, rng);
  const Results ref = run_cpu(c, in), got = run_gpu(c, in, DType::f32, AttentionBackend::automatic);
  const cuda::AttentionRoute route = cuda::last_attention_route();
  EXPECT_FALSE(route.cudnn);
  EXPECT_NE(route.reason.find("bf16"), std::string::npos) << route.reason;
  for (const Named& o : kOutputs) {
    EXPECT_TRUE(assert_close(o.name, ref.*o.member, to_host(got.*o.member), tolerance(DType::f32)));
  }
  try {
    run_gpu(c, in, DType::f32, AttentionBackend::cudnn);
    ADD_FAILURE() << "backend = cudnn ran an f32 call";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("attention_forward: backend = \"cudnn\", but cuDNN cannot serve it"), std::string::npos)
        << what;
    EXPECT_NE(what.find("bf16"), std::string::npos) << what;
  }
  run_gpu(c, in, DType::bf16, AttentionBackend::automatic);
  EXPECT_TRUE(cuda::last_attention_route().cudnn) << cuda::last_attention_route().reason;
}

// cuDNN's JSON description of an H200 (the cudaDeviceProp fields that cuDNN reads: compute
// capability 9.0, 132 multiprocessors, 227 KB of opt-in shared memory per block, 50 MB of L2,
// 141 GB of memory): what the graphs below are built for on a machine without one.
constexpr const char* kH200 =
    R"({"cudaDeviceId":0,"deviceName":"NVIDIA H200","deviceVer":900,"driverVer":13000,"isTccDriver":0,)"
    R"("l2CacheSize":52428800,"maxCtasPerSM":32,"maxRegistersPerSM":65536,"maxSharedMemoryPerBlock":49152,)"
    R"("maxSharedMemoryPerBlockOptin":232448,"maxThreadsPerBlock":1024,"maxThreadsPerSM":2048,)"
    R"("memClockRateKHz":3201000,"multiProcessorCount":132,"pciDeviceId":0,"regsPerBlock":65536,)"
    R"("reservedSharedMemoryPerBlock":1024,"smClockRateKHz":1980000,"supportCoopLaunch":1,)"
    R"("totalGlobalMem":150754820096,"warpSize":32,"maxBlockSize":[1024,1024,64],)"
    R"("maxGridSize":[2147483647,65535,65535]})";

// cuDNN compiles its fused attention kernels through the CUDA driver library: the real one, or the
// toolkit's stub (lib64/stubs) on a machine without a GPU.
bool driver_library_loadable() {
  return dlopen("libcuda.so.1", RTLD_LAZY) != nullptr || dlopen("libcuda.so", RTLD_LAZY) != nullptr;
}

// Dense and ragged layouts, GQA, windows, forward and backward: cuDNN's heuristics accept every
// graph for an H200 and its engines compile their kernels. The plan is then built (a machine with
// that GPU), or fails only at loading the compiled module into a driver that has no such device
// (CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER); a graph cuDNN does not take gets no engine at all.
TEST(CudnnAttentionGraphs, CompileForAnH200WithoutOne) {
  const std::vector<Case> graphs = {
      {SeqLayout::uniform(2, 256), 4, 4, 128, 0},    {SeqLayout::uniform(2, 256), 8, 2, 64, 100},
      {SeqLayout{{0, 15, 100, 300}}, 8, 2, 64, 0},   {SeqLayout{{0, 15, 100, 300}}, 8, 2, 128, 37},
      {SeqLayout{{0, 0, 70, 70, 201}}, 4, 4, 32, 0}, {SeqLayout{{0, 1, 2, 131}}, 2, 1, 64, 1}};
  if (cuda::check_cudnn_attention_plan(kH200, false, graphs[0].shape(), graphs[0].seqs).find("built without cuDNN") !=
      std::string::npos) {
    GTEST_SKIP() << "built without cuDNN";
  }
  if (!driver_library_loadable()) {
    GTEST_SKIP() << "no CUDA driver library to compile cuDNN's kernels with (without a GPU, "
                    "LD_LIBRARY_PATH=/usr/local/cuda/lib64/stubs provides one)";
  }
  for (const Case& c : graphs) {
    for (const bool backward : {false, true}) {
      const std::string refusal = cuda::check_cudnn_attention_plan(kH200, backward, c.shape(), c.seqs);
      EXPECT_TRUE(refusal.empty() || refusal.find("CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER") != std::string::npos)
          << (backward ? "backward " : "forward ") << c.name() << ": " << refusal;
    }
  }
}

TEST_P(GpuAttention, RunsAreBitIdentical) {
  const DType dt = GetParam();
  Rng rng(12);
  const Case c{SeqLayout{{0, 15, 100, 300, 1300}}, 8, 2, 128, 0};
  const Inputs in = make_inputs(c, dt, rng);
  const Results first = run_gpu(c, in, dt), second = run_gpu(c, in, dt);  // the own kernels
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
    ops::attention_forward(out, lse, q, kv, kv, c.shape(AttentionBackend::own), c.seqs);
    ADD_FAILURE() << "no error for head_dim 48";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("attention_forward: shape: head_dim 48"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuAttention, ::testing::Values(DType::f32, DType::bf16), testing::dtype_test_name);

}  // namespace
}  // namespace linea
