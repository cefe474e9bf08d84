// Decoding's attention over KV caches on CUDA (ops::attention_over_cache,
// model/mixers/attention/cuda/attention_decode.cu) against the CPU op in f64 on the same caches and
// queries, in f32 and bf16 (tests/gpu/gpu_test.h's tolerances: f32 1e-5, bf16 5e-3 err_ratio): one
// query per sequence (decoding's step) and several, GQA (8 query heads over 2 kv heads) and plain
// heads, head dims 32, 64, 128 and 256 (and 48, off the warp's multiples), windows 0, 37 and 300,
// positions past the ring's capacity (the rows wrap), and queries that see more than one split of
// 256 keys (up to 1001 keys: four splits, combined). The caches hold random rows everywhere, so
// both sides read the same rows whichever they pick; which rows the decoder stores is checked by
// tests/gpu/inference/test_gpu_decoder.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "model/mixers/attention/attention.h"
#include "tests/gpu/gpu_test.h"

namespace linea {
namespace {

struct Case {
  const char* name;
  int64_t sequences, capacity, q_heads, kv_heads, head_dim, window;
  std::vector<std::pair<int32_t, int32_t>> queries;  // (sequence, position)
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"step_gqa_d64", 3, 300, 8, 2, 64, 0, {{0, 4}, {1, 0}, {2, 250}}},
      {"prompt_tail_gqa_d64", 2, 300, 8, 2, 64, 0, {{0, 10}, {0, 11}, {0, 12}, {1, 3}, {1, 4}}},
      {"window37_wraps_d64", 3, 40, 4, 4, 64, 37, {{0, 36}, {1, 500}, {2, 77}}},
      {"window300_splits_d128", 2, 310, 4, 1, 128, 300, {{0, 1000}, {1, 299}}},
      {"four_splits_d32", 2, 1100, 2, 2, 32, 0, {{0, 1000}, {1, 255}, {1, 256}}},
      {"d256", 2, 64, 2, 1, 256, 0, {{0, 63}, {1, 5}}},
      {"d48", 1, 20, 3, 1, 48, 0, {{0, 19}}},
  };
  return all;
}

using Param = testing::CaseInDtype;

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return testing::case_dtype_name(cases()[info.param.index].name, info.param.dtype);
}

class GpuAttentionDecode : public testing::GpuTest, public ::testing::WithParamInterface<Param> {};

TEST_P(GpuAttentionDecode, MatchesCpuInF64) {
  const Param prm = GetParam();
  const Case& c = cases()[prm.index];
  Rng rng(17 + prm.index);
  const int64_t n = static_cast<int64_t>(c.queries.size()), width = c.kv_heads * c.head_dim;
  const ops::AttentionShape shape{.q_heads = c.q_heads,
                                  .kv_heads = c.kv_heads,
                                  .head_dim = c.head_dim,
                                  .window = c.window,
                                  .scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim))};
  const Tensor q = testing::random_values({n, c.q_heads * c.head_dim}, prm.dtype, rng, -2, 2);
  const Tensor k = testing::random_values({c.sequences, c.capacity, width}, prm.dtype, rng, -2, 2);
  const Tensor v = testing::random_values({c.sequences, c.capacity, width}, prm.dtype, rng);
  Tensor queries = Tensor::empty({n, 2}, DType::i32);
  for (int64_t t = 0; t < n; ++t) {
    queries.data<int32_t>()[2 * t] = c.queries[static_cast<size_t>(t)].first;
    queries.data<int32_t>()[2 * t + 1] = c.queries[static_cast<size_t>(t)].second;
  }
  Tensor ref = Tensor::empty(q.shape(), DType::f64);
  ops::attention_over_cache(ref, q, k, v, queries, shape);
  Tensor out = Tensor::empty(q.shape(), prm.dtype, Device::cuda);
  ops::attention_over_cache(out, testing::to_device(q, prm.dtype), testing::to_device(k, prm.dtype),
                            testing::to_device(v, prm.dtype), queries, shape);
  EXPECT_TRUE(testing::assert_close("out", ref, testing::to_host(out), testing::tolerance(prm.dtype), 0));
  std::printf("%s %s: err_ratio %.3g\n", c.name, std::string(dtype_name(prm.dtype)).c_str(),
              testing::compare(ref, testing::to_host(out)).err_ratio);
}

INSTANTIATE_TEST_SUITE_P(Caches, GpuAttentionDecode, ::testing::ValuesIn(testing::in_both_dtypes(cases().size())),
                         param_name);

}  // namespace
}  // namespace linea
