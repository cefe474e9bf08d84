#include <gtest/gtest.h>

#include "kernels/arena.h"
#include "kernels/random.h"
#include "kernels/seq_layout.h"
#include "kernels/tensor.h"
#include "worker/parameters.h"

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
