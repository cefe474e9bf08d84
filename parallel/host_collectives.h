// Collectives on small host tensors (gradient norms, per-rank sums) over a communicator of either
// device: for a GPU communicator (NCCL) the operation runs on device copies, is waited for, and the
// result is copied back into the host tensor. Collective over comm, as the operation itself.
#pragma once
#include "parallel/communicator.h"

namespace linea {

// x ← the reduction of x over comm's ranks (x on the CPU).
void all_reduce_host(Communicator& comm, const Tensor& x, ReduceOp op);
// output ← input_0 ‖ … ‖ input_{R−1} (both on the CPU).
void all_gather_host(Communicator& comm, const Tensor& input, const Tensor& output);

}  // namespace linea
