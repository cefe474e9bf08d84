#include "kernels/cpu/embedding.h"

#include <optional>

#include "kernels/op_arguments.h"
#include "kernels/ops.h"
#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/ops.h"
#endif

namespace linea::ops {

namespace {

// A vocabulary shard: rows [begin, begin + V) of a table of `vocab` rows.
struct VocabShard {
  int64_t begin, vocab;
};

// The checks both forms make, then kernel(T{}, n, d, begin, V) on the element type, or
// cuda_kernel(begin) on CUDA tensors. Every id must be a row of the whole table: of `table` itself,
// or of the vocabulary that the shard is part of (ids outside the shard are the other ranks'
// business).
template <class Kernel, class CudaKernel>
void run(const char* op, const Tensor& table, const char* table_name, const Tensor& rows, const char* rows_name,
         const Tensor& ids, std::optional<VocabShard> shard, Kernel&& kernel,
         [[maybe_unused]] CudaKernel&& cuda_kernel) {
  OpArguments args(op);
  args.floating(table, table_name, {kAnyDim, kAnyDim}).indices(ids, "ids", {kAnyDim});
  const int64_t n = ids.dim(0), v = table.dim(0), d = table.dim(1);
  args.floating(rows, rows_name, {n, d});
  const int64_t begin = shard ? shard->begin : 0;
  args.require(begin >= 0, "vocab_begin", "expected a row index >= 0, got " + std::to_string(begin));
  const int64_t id_end = shard ? shard->vocab : v;
  args.require(begin + v <= id_end, "vocab",
               "expected the shard's rows [" + std::to_string(begin) + ", " + std::to_string(begin + v) +
                   ") inside the vocabulary, got vocab " + std::to_string(id_end));
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) {
    args.require_indices_in_range(ids, "ids", 0, id_end);
    return cuda_kernel(begin);
  }
#endif
  args.dispatch([&](auto zero) {
    args.require_indices_in_range(ids, "ids", 0, id_end);
    kernel(zero, n, d, begin, v);
  });
}

void lookup(const char* op, Tensor out, const Tensor& table, const Tensor& ids, std::optional<VocabShard> shard) {
  run(
      op, table, "table", out, "out", ids, shard,
      [&](auto zero, int64_t n, int64_t d, int64_t begin, int64_t v) {
        using T = decltype(zero);
        cpu::embedding_forward(out.data<T>(), table.data<T>(), ids.data<int32_t>(), n, d, begin, v);
      },
      [&]([[maybe_unused]] int64_t begin) {
#ifdef LINEA_WITH_CUDA
        cuda::embedding_forward(out, table, ids, begin);
#endif
      });
}

void scatter(const char* op, Tensor dtable, const Tensor& dout, const Tensor& ids, std::optional<VocabShard> shard) {
  run(
      op, dtable, "dtable", dout, "dout", ids, shard,
      [&](auto zero, int64_t n, int64_t d, int64_t begin, int64_t v) {
        using T = decltype(zero);
        cpu::embedding_backward(dtable.data<T>(), dout.data<T>(), ids.data<int32_t>(), n, d, begin, v);
      },
      [&]([[maybe_unused]] int64_t begin) {
#ifdef LINEA_WITH_CUDA
        cuda::embedding_backward(dtable, dout, ids, begin);
#endif
      });
}

}  // namespace

void embedding_forward(Tensor out, const Tensor& table, const Tensor& ids) {
  lookup("embedding_forward", out, table, ids, std::nullopt);
}

void embedding_backward(Tensor dtable, const Tensor& dout, const Tensor& ids) {
  scatter("embedding_backward", dtable, dout, ids, std::nullopt);
}

void embedding_shard_forward(Tensor out, const Tensor& table, const Tensor& ids, int64_t vocab_begin, int64_t vocab) {
  lookup("embedding_shard_forward", out, table, ids, VocabShard{vocab_begin, vocab});
}

void embedding_shard_backward(Tensor dtable, const Tensor& dout, const Tensor& ids, int64_t vocab_begin,
                              int64_t vocab) {
  scatter("embedding_shard_backward", dtable, dout, ids, VocabShard{vocab_begin, vocab});
}

}  // namespace linea::ops
