// CUDA ops over tokens and sequences against the CPU reference (f64 on the same inputs), in f32 and
// bf16: embedding lookup and its scatter-add backward (ids repeated, runs of thousands of tokens, a
// repeatable result, bad ids reported), RoPE forward and inverse at large positions, and the short
// causal convolution + SiLU across packed sequences (an empty one included) for several widths.
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <string>
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

class GpuSequence : public testing::GpuDtypeTest {};

Tensor ids_tensor(int64_t n, int64_t v, Rng& rng) {
  Tensor t = Tensor::empty({n}, DType::i32);
  for (int64_t i = 0; i < n; ++i) t.data<int32_t>()[i] = static_cast<int32_t>(rng.next_u64() % v);
  return t;
}

TEST_P(GpuSequence, Embedding) {
  const DType dt = GetParam();
  Rng rng(1);
  struct Case {
    int64_t n, v, d;
  };
  // The last: runs of about 4000 tokens, longer than a block's scan of the run's end, over 16-byte packs.
  for (const Case c : {Case{1, 1, 1}, Case{40, 3, 7}, Case{1000, 50, 64}, Case{4096, 1000, 256}, Case{20000, 5, 128}}) {
    const Tensor table = random_values({c.v, c.d}, dt, rng), ids = ids_tensor(c.n, c.v, rng);
    const Tensor dout = random_values({c.n, c.d}, dt, rng), dtable0 = random_values({c.v, c.d}, dt, rng);
    Tensor out = Tensor::empty({c.n, c.d}, DType::f64), dtable = dtable0.clone();
    ops::embedding_forward(out, table, ids);
    ops::embedding_backward(dtable, dout, ids);

    Tensor gids = to_device(ids, DType::i32), gout = Tensor::empty({c.n, c.d}, dt, Device::cuda);
    Tensor gdtable = to_device(dtable0, dt);
    ops::embedding_forward(gout, to_device(table, dt), gids);
    ops::embedding_backward(gdtable, to_device(dout, dt), gids);
    EXPECT_TRUE(assert_close("out", out, to_host(gout), 0.0, 0.0)) << "a lookup is a copy";
    EXPECT_TRUE(assert_close("dtable", dtable, to_host(gdtable), tolerance(dt)));
  }
}

TEST_P(GpuSequence, EmbeddingBackwardIsRepeatable) {
  const DType dt = GetParam();
  Rng rng(2);
  const int64_t n = 20000, v = 17, d = 96;  // ~1200 tokens per id
  Tensor ids = to_device(ids_tensor(n, v, rng), DType::i32), dout = to_device(random_values({n, d}, dt, rng), dt);
  auto run = [&] {
    Tensor dtable = Tensor::zeros({v, d}, dt, Device::cuda);
    ops::embedding_backward(dtable, dout, ids);
    return dtable.clone();
  };
  const Tensor first = run(), second = run();
  EXPECT_EQ(0, std::memcmp(first.raw(), second.raw(), first.nbytes()));
}

TEST_P(GpuSequence, EmbeddingBadIdIsReported) {
  const DType dt = GetParam();
  Tensor ids = Tensor::empty({2}, DType::i32);
  ids.data<int32_t>()[0] = 0;
  ids.data<int32_t>()[1] = 4;
  Tensor table = Tensor::zeros({4, 3}, dt, Device::cuda), out = Tensor::empty({2, 3}, dt, Device::cuda);
  try {
    ops::embedding_forward(out, table, to_device(ids, DType::i32));
    ADD_FAILURE() << "no error for id 4 of a 4-row table";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("ids: entry 1 is 4"), std::string::npos) << e.what();
  }
}

TEST_P(GpuSequence, Rope) {
  const DType dt = GetParam();
  Rng rng(3);
  struct Case {
    int64_t n, heads, dh;
    int32_t max_position;
  };
  for (const Case c : {Case{1, 1, 2, 1}, Case{33, 3, 16, 40}, Case{256, 4, 64, 32768}, Case{100, 2, 128, 1 << 20}}) {
    const Tensor x = random_values({c.n, c.heads * c.dh}, dt, rng);
    Tensor positions = Tensor::empty({c.n}, DType::i32);
    for (int64_t i = 0; i < c.n; ++i)
      positions.data<int32_t>()[i] = static_cast<int32_t>(rng.next_u64() % c.max_position);
    Tensor gpos = to_device(positions, DType::i32);
    for (bool inverse : {false, true}) {
      Tensor ref = x.clone(), gx = to_device(x, dt);
      ops::rope_apply(ref, positions, c.heads, 10000.0, inverse);
      ops::rope_apply(gx, gpos, c.heads, 10000.0, inverse);
      EXPECT_TRUE(assert_close(inverse ? "inverse" : "forward", ref, to_host(gx), tolerance(dt)));
    }
  }
}

// Cases for every kernel path: 16-byte staging (C a multiple of 16 / sizeof(T)) or one element (odd
// C; C = 132 in bf16), W ≤ 4 or wider; tiles of channels cut by C, runs, tiles and spans of tokens
// cut by sequence starts and by N, and with and without a bias.
TEST_P(GpuSequence, ShortConvSilu) {
  const DType dt = GetParam();
  Rng rng(4);
  struct Case {
    SeqLayout seqs;
    int64_t channels, width;
  };
  const std::vector<Case> cases = {{SeqLayout::uniform(1, 1), 1, 1},
                                   {SeqLayout{{0, 5, 5, 37, 100}}, 48, 4},
                                   {SeqLayout{{0, 2, 3, 64}}, 33, 3},
                                   {SeqLayout::uniform(4, 300), 256, 4},
                                   {SeqLayout{{0, 31, 33, 290, 700}}, 132, 2},
                                   {SeqLayout{{0, 7, 300}}, 20, 9},
                                   {SeqLayout{{0, 1, 40}}, 5, 16}};
  for (const Case& c : cases) {
    for (const bool with_bias : {false, true}) {
      SCOPED_TRACE("C=" + std::to_string(c.channels) + " W=" + std::to_string(c.width) +
                   (with_bias ? " with bias" : ""));
      const int64_t n = c.seqs.num_tokens();
      const Shape s{n, c.channels};
      const Tensor x = random_values(s, dt, rng, -2, 2), w = random_values({c.channels, c.width}, dt, rng);
      const Tensor dout = random_values(s, dt, rng), dw0 = random_values({c.channels, c.width}, dt, rng);
      const Tensor bias = with_bias ? random_values({c.channels}, dt, rng) : Tensor();
      const Tensor db0 = with_bias ? random_values({c.channels}, dt, rng) : Tensor();
      Tensor out = Tensor::empty(s, DType::f64), dx = Tensor::empty(s, DType::f64), dw = dw0.clone();
      Tensor db = with_bias ? db0.clone() : Tensor();
      ops::short_conv_silu_forward(out, x, w, c.seqs, bias);
      ops::short_conv_silu_backward(dx, dw, dout, x, w, c.seqs, bias, db);

      Tensor gx = to_device(x, dt), gw = to_device(w, dt), gdw = to_device(dw0, dt);
      const Tensor gbias = testing::device_copy(bias, dt);
      Tensor gdb = testing::device_copy(db0, dt);
      Tensor gout = Tensor::empty(s, dt, Device::cuda), gdx = Tensor::empty(s, dt, Device::cuda);
      ops::short_conv_silu_forward(gout, gx, gw, c.seqs, gbias);
      ops::short_conv_silu_backward(gdx, gdw, to_device(dout, dt), gx, gw, c.seqs, gbias, gdb);
      EXPECT_TRUE(assert_close("out", out, to_host(gout), tolerance(dt)));
      EXPECT_TRUE(assert_close("dx", dx, to_host(gdx), tolerance(dt)));
      EXPECT_TRUE(assert_close("dweight", dw, to_host(gdw), tolerance(dt)));
      if (with_bias) {
        EXPECT_TRUE(assert_close("dbias", db, to_host(gdb), tolerance(dt)));
      }
    }
  }
}

// The parameter gradients are sums in a fixed order: two runs give the same bits.
TEST_P(GpuSequence, ShortConvSiluGradientsRepeat) {
  const DType dt = GetParam();
  Rng rng(5);
  const SeqLayout seqs{{0, 100, 1500, 3000}};
  const Shape s{3000, 64};
  const Tensor x = to_device(random_values(s, dt, rng), dt), w = to_device(random_values({64, 4}, dt, rng), dt);
  const Tensor bias = to_device(random_values({64}, dt, rng), dt), dout = to_device(random_values(s, dt, rng), dt);
  std::vector<Tensor> dws, dbs;
  for (int run = 0; run < 2; ++run) {
    Tensor dx = Tensor::empty(s, dt, Device::cuda), dw = Tensor::zeros({64, 4}, dt, Device::cuda);
    Tensor db = Tensor::zeros({64}, dt, Device::cuda);
    ops::short_conv_silu_backward(dx, dw, dout, x, w, seqs, bias, db);
    dws.push_back(to_host(dw));
    dbs.push_back(to_host(db));
  }
  EXPECT_EQ(std::memcmp(dws[0].raw(), dws[1].raw(), dws[0].nbytes()), 0);
  EXPECT_EQ(std::memcmp(dbs[0].raw(), dbs[1].raw(), dbs[0].nbytes()), 0);
}

// The 340M training shapes: 16384 tokens in sequences of 4096, C = 1024 and 2048,
// W = 4, with a bias; against the CPU and the same bits on a second run (out, dx, dweight, dbias).
TEST_P(GpuSequence, ShortConvSiluTrainingShape) {
  const DType dt = GetParam();
  Rng rng(7);
  const SeqLayout seqs = SeqLayout::uniform(4, 4096);
  for (const int64_t channels : {int64_t{1024}, int64_t{2048}}) {
    SCOPED_TRACE("C=" + std::to_string(channels));
    const Shape s{seqs.num_tokens(), channels};
    const Tensor x = random_values(s, dt, rng, -2, 2), w = random_values({channels, 4}, dt, rng);
    const Tensor dout = random_values(s, dt, rng), bias = random_values({channels}, dt, rng);
    Tensor out = Tensor::empty(s, DType::f64), dx = Tensor::empty(s, DType::f64);
    Tensor dw = Tensor::zeros({channels, 4}, DType::f64), db = Tensor::zeros({channels}, DType::f64);
    ops::short_conv_silu_forward(out, x, w, seqs, bias);
    ops::short_conv_silu_backward(dx, dw, dout, x, w, seqs, bias, db);
    const Tensor gx = to_device(x, dt), gw = to_device(w, dt), gb = to_device(bias, dt), gd = to_device(dout, dt);
    std::vector<testing::NamedTensors> runs;
    for (int run = 0; run < 3; ++run) {
      Tensor gout = Tensor::empty(s, dt, Device::cuda), gdx = Tensor::empty(s, dt, Device::cuda);
      Tensor gdw = Tensor::zeros({channels, 4}, dt, Device::cuda), gdb = Tensor::zeros({channels}, dt, Device::cuda);
      ops::short_conv_silu_forward(gout, gx, gw, seqs, gb);
      ops::short_conv_silu_backward(gdx, gdw, gd, gx, gw, seqs, gb, gdb);
      runs.push_back(
          {{"out", to_host(gout)}, {"dx", to_host(gdx)}, {"dweight", to_host(gdw)}, {"dbias", to_host(gdb)}});
    }
    const Tensor* ref[] = {&out, &dx, &dw, &db};
    for (size_t i = 0; i < runs[0].size(); ++i) {
      EXPECT_TRUE(assert_close(runs[0][i].first, *ref[i], runs[0][i].second, tolerance(dt)));
    }
    for (int run = 1; run < 3; ++run) testing::expect_same_bits(runs[0], runs[run], "run " + std::to_string(run));
  }
}

TEST_P(GpuSequence, ShortConvSiluRefusesWideKernels) {
  const DType dt = GetParam();
  Rng rng(6);
  const Tensor x = to_device(random_values({10, 4}, dt, rng), dt), w = to_device(random_values({4, 17}, dt, rng), dt);
  Tensor out = Tensor::empty({10, 4}, dt, Device::cuda);
  try {
    ops::short_conv_silu_forward(out, x, w, SeqLayout::uniform(1, 10));
    FAIL() << "a kernel width of 17 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("width"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuSequence, ::testing::Values(DType::f32, DType::bf16), testing::dtype_test_name);

}  // namespace
}  // namespace linea
