// Checks and dispatch of the row copies (kernels/ops.h): on the CPU one memcpy per pair; on CUDA
// kernels/cuda/copy_rows.cu.
#include <cstring>
#include <string>
#include <vector>

#include "kernels/op_arguments.h"
#include "kernels/ops.h"
#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/ops.h"
#endif

namespace linea::ops {

void copy_rows(Tensor out, const Tensor& in, const Tensor& rows) {
  OpArguments args("copy_rows");
  args.floating(in, "in", {kAnyDim, kAnyDim}).floating(out, "out", {kAnyDim, in.dim(1)});
  args.require(rows.defined() && rows.dtype() == DType::i32 && rows.ndim() == 2 && rows.dim(1) == 2 &&
                   rows.device() == Device::cpu,
               "rows", "expected i32 [P, 2] (pairs to, from) on the cpu, got " + rows.describe());
  const size_t row_bytes = static_cast<size_t>(in.dim(1)) * dtype_size(in.dtype());
  const char *in_begin = static_cast<const char*>(in.raw()), *out_begin = static_cast<const char*>(out.raw());
  args.require(out_begin + out.nbytes() <= in_begin || in_begin + in.nbytes() <= out_begin, "out",
               "must not overlap in");
  const int32_t* pair = rows.data<int32_t>();
  const int64_t count = rows.dim(0);
  std::vector<bool> written(static_cast<size_t>(out.dim(0)), false);
  // The messages are built only on failure: a prefill checks a pair per token and layer.
  for (int64_t i = 0; i < count; ++i) {
    const int32_t to = pair[2 * i], from = pair[2 * i + 1];
    if (to < 0 || to >= out.dim(0) || from < 0 || from >= in.dim(0)) {
      args.fail("rows", "pair " + std::to_string(i) + " (" + std::to_string(to) + ", " + std::to_string(from) +
                            ") is outside out's " + std::to_string(out.dim(0)) + " rows or in's " +
                            std::to_string(in.dim(0)));
    }
    if (written[static_cast<size_t>(to)]) {
      args.fail("rows", "row " + std::to_string(to) + " of out is written twice (pair " + std::to_string(i) + ")");
    }
    written[static_cast<size_t>(to)] = true;
  }
  if (count == 0 || row_bytes == 0) return;
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::copy_rows(out, in, rows);
#endif
  args.dispatch([&](auto) {
    for (int64_t i = 0; i < count; ++i) {
      std::memcpy(static_cast<char*>(out.raw()) + static_cast<size_t>(pair[2 * i]) * row_bytes,
                  in_begin + static_cast<size_t>(pair[2 * i + 1]) * row_bytes, row_bytes);
    }
  });
}

}  // namespace linea::ops
