// MpiCommunicator: Communicator over MPI for CPU tensors (f32, f64, bf16 carried as 16-bit words,
// i32, i64), the backend CI runs under `mpirun -np 2/4`.
//
// Reductions are deterministic: MPI_Allreduce may combine floats in any order, so this backend
// does not use MPI's reductions. A reduction over n elements is split into R nearly equal chunks
// (chunk j: the j-th run of ⌊n/R⌋ or ⌈n/R⌉ elements); an all-to-all hands chunk j of every rank to
// rank j, which combines them with ordered_reduce (rank order, f64/int64 accumulator, one rounding);
// all_reduce then all-gathers the reduced chunks. Each element is therefore reduced once, by one
// rank, in a fixed order: bit-identical on every rank and in every run with the same world size.
// Traffic is 2·(R−1)/R of the buffer per rank, the same as a ring all-reduce.
// Large buffers go in pieces of at most options.max_piece_bytes (64 MiB by default), which bounds
// the scratch memory and keeps MPI's int counts from overflowing. Every MPI operation is nonblocking and waited for
// with options.timeout.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/mpi_comm.h"

namespace linea {

class MpiCommunicator final : public Communicator {
 public:
  // Collective over `group`: works on its own duplicate of it (the caller keeps its handle).
  MpiCommunicator(MPI_Comm group, std::string name, CommunicatorOptions options = {});
  // A broken communicator keeps its MPI handle (MpiComm::leak): an operation may still be pending.
  ~MpiCommunicator() override;
  std::string_view backend() const override { return "mpi"; }
  Device device() const override { return Device::cpu; }
  MPI_Comm mpi_comm() const { return comm_.get(); }

 protected:
  void do_all_reduce(const Tensor& x, ReduceOp op) override;
  void do_reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) override;
  void do_all_gather(const Tensor& input, const Tensor& output) override;
  void do_broadcast(const Tensor& x, int root) override;
  void do_send(const Tensor& x, int peer) override;
  void do_recv(const Tensor& x, int peer) override;
  void do_barrier() override;

 private:
  // Rank j receives elements [displacements[j], displacements[j] + counts[j]) of every rank's
  // `send` and writes their ordered reduction to `out` (counts[j] elements).
  void reduce_to_owners(const char* send, const std::vector<int>& counts, const std::vector<int>& displacements,
                        char* out, DType dtype, ReduceOp op, const char* what);
  int64_t piece_elements(DType dtype) const;  // elements of dtype in options().max_piece_bytes
  void wait(MPI_Request& request, const char* what, const Tensor& t);

  MpiComm comm_;
  std::vector<std::byte> scratch_;  // the R contributions to this rank's chunk
};

}  // namespace linea
