// Checkpoints written by several ranks (each its blocks of the full tensors) and read back under
// another layout: any block is assembled from the stored ones, bit for bit; parts that leave a gap
// or overlap are refused at commit and at load, naming the tensor; block copies in any rank of
// tensor agree with a plain index loop.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "kernels/random.h"
#include "tests/testing/error_of.h"
#include "tests/testing/temp_dir.h"

namespace linea {
namespace {

using testing::error_of;

namespace fs = std::filesystem;
using nlohmann::json;

// Element (i, j, k) of the full test tensor: a value that names its place.
float full_value(int64_t i, int64_t j, int64_t k) { return static_cast<float>(i * 10000 + j * 100 + k); }

// The block [offset, offset + shape) of the full 3-D test tensor.
Tensor block_of_full(const std::vector<int64_t>& offset, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::f32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < shape[0]; ++i) {
    for (int64_t j = 0; j < shape[1]; ++j) {
      for (int64_t k = 0; k < shape[2]; ++k) {
        *p++ = full_value(offset[0] + i, offset[1] + j, offset[2] + k);
      }
    }
  }
  return t;
}

CheckpointState metadata(int64_t step, int64_t tp, int64_t dp) {
  CheckpointState s;
  s.step = step;
  s.tokens = 100 * step;
  s.config = "cfg";
  s.data_position = {{"step", step}};
  s.trainer_state = {{"optimizer_step", step}};
  s.layout = {tp, dp, tp * dp};
  return s;
}

const Shape kFull = {6, 5, 4};

// Rank r of 3 saves: "w" split along dim 0 (rows 0–1, 2–3, 4–5), "v" (a vector) whole on rank 1,
// and "m" split along dim 1 (columns 0–1, 2, 3–4), as TP × DP layouts would.
CheckpointState part(int rank) {
  CheckpointState s = metadata(7, 1, 3);
  s.tensors.emplace_back("w", block_of_full({2 * rank, 0, 0}, {2, 5, 4}), kFull, std::vector<int64_t>{2 * rank, 0, 0});
  if (rank == 1) {
    Tensor v = Tensor::empty({3}, DType::f64);
    for (int i = 0; i < 3; ++i) v.data<double>()[i] = 0.5 + i;
    s.tensors.emplace_back("v", v);
  }
  const int64_t col_begin = rank == 0 ? 0 : rank == 1 ? 2 : 3, cols = rank == 1 ? 1 : 2;
  s.tensors.emplace_back("opt/m", block_of_full({0, col_begin, 0}, {6, cols, 4}), kFull,
                         std::vector<int64_t>{0, col_begin, 0});
  return s;
}

fs::path save_three_ranks(const fs::path& root) {
  const fs::path temporary = begin_checkpoint_save(root, 7);
  for (int rank = 0; rank < 3; ++rank) write_checkpoint_part(temporary, part(rank), rank);
  return commit_checkpoint_save(temporary, metadata(7, 1, 3), 3, 2);
}

TEST(CheckpointResharding, BlocksOfSeveralRanksReadAsAnyBlock) {
  testing::TempDir root;
  const fs::path directory = save_three_ranks(root.path());
  for (const char* file : {"rank-00000.h5", "rank-00001.h5", "rank-00002.h5", "manifest.json", "COMMITTED"}) {
    EXPECT_TRUE(fs::exists(directory / file)) << file;
  }
  EXPECT_FALSE(fs::exists(directory / "rank-00000.json"));  // the parts' entries moved into the manifest

  CheckpointReader reader(directory);
  EXPECT_EQ(reader.info().step, 7);
  EXPECT_EQ(reader.info().layout, (CheckpointLayout{1, 3, 3}));
  EXPECT_EQ(reader.tensor_names(), (std::vector<std::string>{"w", "opt/m", "v"}));
  EXPECT_EQ(reader.full_shape("w"), kFull);
  // Blocks that cross the stored ones in every way: as one rank, as 2 or 4 ranks along either dim.
  const std::vector<std::pair<std::vector<int64_t>, Shape>> wanted = {
      {{0, 0, 0}, {6, 5, 4}}, {{0, 0, 0}, {3, 5, 4}}, {{3, 0, 0}, {3, 5, 4}}, {{1, 1, 1}, {4, 3, 2}},
      {{5, 4, 3}, {1, 1, 1}}, {{0, 2, 0}, {6, 3, 4}}, {{2, 0, 0}, {0, 5, 4}}};
  for (const char* name : {"w", "opt/m"}) {
    for (const auto& [offset, shape] : wanted) {
      Tensor out = Tensor::empty(shape, DType::f32);
      reader.read(name, offset, out);
      const Tensor expected = block_of_full(offset, shape);
      EXPECT_EQ(std::memcmp(out.raw(), expected.raw(), expected.nbytes()), 0)
          << name << " " << block_string({offset, shape});
    }
  }
  const Tensor v = reader.read("v");
  EXPECT_EQ(v.data<double>()[2], 2.5);

  // load_checkpoint assembles every tensor whole; the newest-checkpoint lookup takes it too.
  const CheckpointState whole = load_checkpoint(directory);
  ASSERT_EQ(whole.tensors.size(), 3u);
  const Tensor expected = block_of_full({0, 0, 0}, kFull);
  EXPECT_EQ(std::memcmp(whole.tensors[0].data.raw(), expected.raw(), expected.nbytes()), 0);
  EXPECT_EQ(load_latest_checkpoint(root.path())->step, 7);

  // Reading outside the tensor, or into the wrong dtype, is refused.
  Tensor bad = Tensor::empty({2, 5, 4}, DType::f32);
  EXPECT_NE(error_of<std::runtime_error>([&] {
              reader.read("w", {5, 0, 0}, bad);
            }).find("cannot read the block [5:7, 0:5, 0:4]"),
            std::string::npos);
  Tensor wrong_dtype = Tensor::empty({2, 5, 4}, DType::f64);
  EXPECT_THROW(reader.read("w", {0, 0, 0}, wrong_dtype), std::runtime_error);
  EXPECT_NE(error_of<std::runtime_error>([&] { reader.read("absent"); }).find("has no tensor 'absent'"),
            std::string::npos);
}

TEST(CheckpointResharding, ADamagedRankFileIsFoundWhenItsBlocksAreRead) {
  testing::TempDir root;
  const fs::path directory = save_three_ranks(root.path());
  fs::resize_file(directory / "rank-00002.h5", fs::file_size(directory / "rank-00002.h5") / 2);
  CheckpointReader reader(directory);  // the manifest is sound
  Tensor first_rows = Tensor::empty({2, 5, 4}, DType::f32);
  reader.read("w", {0, 0, 0}, first_rows);  // rank 0's file alone: fine
  EXPECT_NE(error_of<std::runtime_error>([&] { reader.read("w"); }).find("rank-00002.h5"), std::string::npos);
  EXPECT_THROW(load_checkpoint(directory), std::runtime_error);
}

TEST(CheckpointResharding, PartsThatDoNotTileAreRefused) {
  {  // a rank's part missing: the commit names the file
    testing::TempDir root;
    const fs::path temporary = begin_checkpoint_save(root.path(), 7);
    write_checkpoint_part(temporary, part(0), 0);
    write_checkpoint_part(temporary, part(2), 2);
    EXPECT_NE(error_of<std::runtime_error>([&] {
                commit_checkpoint_save(temporary, metadata(7, 1, 3), 3, 2);
              }).find("rank-00001.json"),
              std::string::npos);
    EXPECT_TRUE(list_committed_checkpoints(root.path()).empty());
  }
  {  // two ranks writing the same rows: overlap
    testing::TempDir root;
    const fs::path temporary = begin_checkpoint_save(root.path(), 7);
    write_checkpoint_part(temporary, part(0), 0);
    write_checkpoint_part(temporary, part(1), 1);
    CheckpointState again = part(2);
    again.tensors[0] = CheckpointTensor("w", block_of_full({2, 0, 0}, {2, 5, 4}), kFull, {2, 0, 0});  // rows 2–3 again
    write_checkpoint_part(temporary, again, 2);
    const std::string message =
        error_of<std::runtime_error>([&] { commit_checkpoint_save(temporary, metadata(7, 1, 3), 3, 2); });
    EXPECT_NE(message.find("tensor 'w': the blocks [2:4, 0:5, 0:4] (rank-00001.h5) and [2:4, 0:5, 0:4] (rank-00002.h5) "
                           "overlap"),
              std::string::npos)
        << message;
  }
  {  // a gap: rows 4–5 of "w" and the last two columns of "opt/m" missing
    testing::TempDir root;
    const fs::path temporary = begin_checkpoint_save(root.path(), 7);
    write_checkpoint_part(temporary, part(0), 0);
    write_checkpoint_part(temporary, part(1), 1);
    const std::string message =
        error_of<std::runtime_error>([&] { commit_checkpoint_save(temporary, metadata(7, 1, 2), 2, 2); });
    EXPECT_NE(
        message.find(
            "tensor 'opt/m' of shape [6, 5, 4]: its blocks hold 72 of its 120 elements (a rank's part is missing)"),
        std::string::npos)
        << message;
  }
  // A block outside its full shape is refused before anything is written.
  CheckpointState outside = metadata(7, 1, 1);
  outside.tensors.emplace_back("w", block_of_full({0, 0, 0}, {2, 5, 4}), kFull, std::vector<int64_t>{5, 0, 0});
  testing::TempDir root;
  try {
    save_checkpoint(root.path(), outside, 1);
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("the block [5:7, 0:5, 0:4] of shape [2, 5, 4] does not lie inside"),
              std::string::npos)
        << e.what();
  }
}

TEST(CheckpointResharding, BlockCopiesMatchAnIndexLoop) {
  Rng rng(3);
  const Shape full = {5, 4, 3, 2};
  Tensor whole = Tensor::empty(full, DType::f64);
  fill_normal(whole, rng, 0.0, 1.0);
  const auto at = [&](int64_t a, int64_t b, int64_t c, int64_t d) {
    return whole.data<double>()[((a * 4 + b) * 3 + c) * 2 + d];
  };
  // src: the block at (1, 0, 1, 0) of shape (3, 4, 2, 2); dst: the block at (2, 1, 0, 1) of shape (3, 2, 3, 1).
  const std::vector<int64_t> src_offset = {1, 0, 1, 0}, dst_offset = {2, 1, 0, 1};
  Tensor src = Tensor::empty({3, 4, 2, 2}, DType::f64), dst = Tensor::zeros({3, 2, 3, 1}, DType::f64);
  double* s = src.data<double>();
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t c = 0; c < 2; ++c)
        for (int64_t d = 0; d < 2; ++d) *s++ = at(1 + a, b, 1 + c, d);
  EXPECT_EQ(copy_block_overlap(src, src_offset, dst, dst_offset), 2 * 2 * 2 * 1);
  EXPECT_EQ(block_overlap_numel({src_offset, src.shape()}, {dst_offset, dst.shape()}), 8);
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t c = 0; c < 3; ++c) {
        const int64_t fa = 2 + a, fb = 1 + b, fc = c, fd = 1;
        const bool inside_src = fa >= 1 && fa < 4 && fc >= 1 && fc < 3;
        EXPECT_EQ(dst.data<double>()[(a * 2 + b) * 3 + c], inside_src ? at(fa, fb, fc, fd) : 0.0)
            << a << " " << b << " " << c;
      }
  EXPECT_EQ(copy_block_overlap(src, {5, 0, 0, 0}, dst, dst_offset), 0);  // disjoint
  EXPECT_TRUE(block_inside({{0, 0, 0, 0}, full}, full));
  EXPECT_FALSE(block_inside({{1, 0, 0, 0}, full}, full));
}

}  // namespace
}  // namespace linea
