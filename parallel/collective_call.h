// CollectiveCall: what one rank asks of a communicator in one call (the operation, element type,
// element count, root or peer and reduction), used to check arguments and to compare the calls of
// different ranks (collective_check.h).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/dtype.h"

namespace linea {

// How all_reduce / reduce_scatter combine the ranks' values: their sum, or their mean (the sum
// divided by the number of ranks; floating types only).
enum class ReduceOp : uint8_t { sum, avg };
std::string_view reduce_op_name(ReduceOp op);

enum class CollectiveKind : uint8_t { all_reduce, reduce_scatter, all_gather, broadcast, send, recv, barrier };
std::string_view collective_kind_name(CollectiveKind kind);

struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::barrier;
  DType dtype = DType::f32;
  int64_t count = 0;  // elements of the rank's input (all_reduce, broadcast, send and recv: the buffer)
  int peer = -1;      // broadcast: the root; send: the destination; recv: the source
  ReduceOp op = ReduceOp::sum;

  // e.g. "all_reduce(f32 × 1024, sum)", "broadcast(bf16 × 8, root 0)", "send(f32 × 3, to rank 1)"
  std::string describe() const;
};

}  // namespace linea
