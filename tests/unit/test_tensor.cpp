#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>

#include "kernels/arena.h"
#include "kernels/random.h"
#include "kernels/seq_layout.h"
#include "kernels/tensor.h"
#include "model/parameters.h"

namespace linea {

TEST(Tensor, ShapeSliceReshape) {
  Tensor t = Tensor::zeros({4, 3}, DType::f32);
  EXPECT_EQ(t.numel(), 12);
  EXPECT_EQ(t.nbytes(), 48u);
  t.data<float>()[3] = 5.f;
  Tensor row1 = t.slice(1, 2);
  EXPECT_EQ(row1.shape(), (Shape{1, 3}));
  EXPECT_EQ(row1.data<float>()[0], 5.f);
  EXPECT_EQ(t.reshape({2, 6}).dim(1), 6);
  EXPECT_THROW(t.reshape({5}), std::invalid_argument);
  EXPECT_THROW(t.slice(2, 5), std::out_of_range);
  EXPECT_THROW(t.data<double>(), std::invalid_argument);
}

TEST(Tensor, Bf16RoundsToNearestEven) {
  EXPECT_EQ(static_cast<float>(bf16(1.0f)), 1.0f);
  EXPECT_EQ(static_cast<float>(bf16(1.00390625f)), 1.0f);       // tie → even
  EXPECT_EQ(static_cast<float>(bf16(1.01171875f)), 1.015625f);  // tie → even (up)
}

TEST(Arena, FoldsIntoOneBlockAfterFirstStep) {
  Arena arena;
  for (int step = 0; step < 3; ++step) {
    Tensor a = arena.alloc({1 << 18}, DType::f32);
    Tensor b = arena.alloc({1 << 19}, DType::f32);
    EXPECT_NE(a.raw(), b.raw());
    arena.reset();
  }
  EXPECT_EQ(arena.capacity_bytes(), arena.high_water_bytes());
}

// The first step's spilled blocks hold at most about 9/8 of what it used (doubling blocks would
// hold 64 MiB for these 33).
TEST(Arena, FirstStepHoldsLittleMoreThanItUses) {
  Arena arena;
  for (int i = 0; i < 33 * 16; ++i) arena.alloc({1 << 14}, DType::f32);  // 64 KiB each
  EXPECT_EQ(arena.high_water_bytes(), size_t(33) << 20);
  EXPECT_LE(arena.capacity_bytes(), arena.high_water_bytes() / 8 * 9 + (size_t(1) << 20));
  arena.reset();
  EXPECT_EQ(arena.capacity_bytes(), arena.high_water_bytes());
}

// release(mark) frees what came after the mark for reuse, also across the first step's spilled
// blocks, and keeps what came before; the high water counts what was held at once.
TEST(Arena, ReleaseReusesWhatCameAfterTheMark) {
  Arena arena;
  const Tensor kept = arena.alloc({1 << 18}, DType::f32);  // 1 MiB
  const Arena::Mark mark = arena.mark();
  const Tensor first = arena.alloc({1 << 19}, DType::f32);  // 2 MiB: a second block
  arena.alloc({1 << 18}, DType::f32);
  arena.release(mark);
  const Tensor again = arena.alloc({1 << 19}, DType::f32);
  EXPECT_EQ(again.raw(), first.raw());
  EXPECT_NE(again.raw(), kept.raw());
  const size_t capacity = arena.capacity_bytes();
  for (int i = 0; i < 10; ++i) {
    arena.release(mark);
    arena.alloc({1 << 19}, DType::f32);
    arena.alloc({1 << 18}, DType::f32);
  }
  EXPECT_EQ(arena.capacity_bytes(), capacity);  // nothing new was taken
  EXPECT_EQ(arena.high_water_bytes(), size_t(4) << 20);
  arena.reset();
  EXPECT_EQ(arena.capacity_bytes(), size_t(4) << 20);
  const Arena::Mark start = arena.mark();
  const Tensor a = arena.alloc({1 << 18}, DType::f32);
  arena.release(start);
  EXPECT_EQ(arena.alloc({1 << 18}, DType::f32).raw(), a.raw());
}

TEST(SeqLayout, PositionsAndValidation) {
  SeqLayout s{{0, 3, 5}};
  EXPECT_EQ(s.positions(), (std::vector<int32_t>{0, 1, 2, 0, 1}));
  EXPECT_NO_THROW(s.validate(5));
  EXPECT_THROW(s.validate(6), std::invalid_argument);
  EXPECT_THROW((SeqLayout{{0, 4, 3}}).validate(3), std::invalid_argument);
  EXPECT_EQ(SeqLayout::uniform(2, 4).cu_seqlens, (std::vector<int64_t>{0, 4, 8}));
}

TEST(Rng, StateRoundTrip) {
  Rng a(42);
  a.next_u64();
  Rng b(7);
  b.set_state(a.state());
  EXPECT_EQ(a.next_u64(), b.next_u64());
}

// The fills are counter-based: the same values whatever the number of threads, a prefix of a
// longer fill with the same key, one draw of the Rng per call, and the moments of their law.
TEST(Rng, FillsAreCounterBasedAndHaveTheirLaw) {
  const int64_t n = 1 << 18;  // several parallel blocks
  Tensor many = Tensor::empty({n}, DType::f64), one = Tensor::empty({n}, DType::f64);
  Tensor prefix = Tensor::empty({1001}, DType::f32);
  Rng a(3), b(3), c(3);
  fill_normal(many, a, 1.0, 2.0);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  fill_normal(one, b, 1.0, 2.0);
  omp_set_num_threads(threads);
  fill_normal(prefix, c, 1.0, 2.0);
  EXPECT_EQ(std::memcmp(many.raw(), one.raw(), many.nbytes()), 0);
  for (int64_t i = 0; i < prefix.numel(); ++i) EXPECT_EQ(prefix.data<float>()[i], float(many.data<double>()[i]));
  EXPECT_EQ(a.next_u64(), b.next_u64());
  Rng d(3);
  d.next_u64();
  EXPECT_EQ(c.next_u64(), d.next_u64());

  double sum = 0, squares = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double z = (many.data<double>()[i] - 1.0) / 2.0;
    sum += z;
    squares += z * z;
  }
  EXPECT_NEAR(sum / n, 0.0, 5.0 / std::sqrt(double(n)));  // 5 standard errors
  EXPECT_NEAR(squares / n, 1.0, 5.0 * std::sqrt(2.0 / n));

  Tensor u = Tensor::empty({n}, DType::f32);
  fill_uniform(u, a, -1.0, 3.0);
  double usum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float x = u.data<float>()[i];
    ASSERT_TRUE(x >= -1.0f && x <= 3.0f) << i;
    usum += x;
  }
  EXPECT_NEAR(usum / n, 1.0, 5.0 * 4.0 / std::sqrt(12.0 * n));
}

TEST(ParameterSet, FlatBuffersAndViews) {
  ParameterSet ps;
  Parameter* w = ps.declare("w", {2, 3}, ParamRole::matrix, true);
  Parameter* g = ps.declare("g", {3}, ParamRole::vector, false);
  EXPECT_THROW(ps.declare("w", {1}, ParamRole::vector, false), std::invalid_argument);
  ps.finalize();
  EXPECT_EQ(ps.numel(), 9);
  g->value.data<float>()[0] = 2.f;
  EXPECT_EQ(ps.values().data<float>()[6], 2.f);
  EXPECT_EQ(w->grad.numel(), 6);
  EXPECT_EQ(ps.find("g"), g);
}

}  // namespace linea
