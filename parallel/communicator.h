// Communicator: the collective operations linea's parallel code uses, over one group of ranks,
// whatever engine carries them — MpiCommunicator (CPU tensors), NcclCommunicator (GPU tensors) or
// LocalCommunicator (a group of one process, no engine). Model code is written once against this.
//
// Contract:
// - Every rank of the group calls the same operations in the same order, with the same dtype and
//   element count (and root, for broadcast). send(x, p) on rank q meets recv(y, q) on rank p with
//   the same dtype and count. Element counts matter, shapes do not.
// - Tensors are contiguous and live on device(). Results are written into the tensors given (a
//   Tensor is a handle, so `const Tensor&` arguments are written through).
// - Arguments are checked on the calling rank first (std::invalid_argument). With
//   options.validate the ranks also compare a description of every call before making it
//   (collective_check.h); when they differ every rank involved throws CollectiveMismatch naming
//   what each asked for. The communicator stays usable after that.
// - Engine failures throw (MpiError, std::runtime_error); a wait longer than options.timeout throws
//   CommunicationTimeout. After either the communicator is broken: later calls throw at once.
// - CPU backends finish an operation before returning. GPU backends enqueue it on their stream and
//   return; synchronize() waits for all of it. The stream is ordered against the default CUDA
//   stream, where the ops run: an operation starts after the work already enqueued there, and the
//   work enqueued there afterwards waits for it, so its tensors may be used as if it ran there.
// - Overlap (GPU backends): between begin_overlap() and end_overlap() the second half is left out,
//   so that the default stream goes on (e.g. with the rest of backward) while the operations run;
//   their tensors must not be touched until end_overlap(), after which the default stream's work
//   waits for all of them. CPU backends have nothing to overlap: there these only set the flag.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "kernels/tensor.h"
#include "parallel/collective_call.h"

namespace linea {

class CollectiveChecker;

struct CommunicatorOptions {
  bool validate = false;  // compare every call across ranks first (tests, debugging)
  std::chrono::milliseconds timeout = std::chrono::minutes(10);  // longest wait for other ranks; 0: none
  int64_t max_piece_bytes = int64_t{64} << 20;                   // MPI backend: most bytes one MPI call carries (>= 8)
};

class Communicator {
 public:
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  const std::string& name() const { return name_; }  // e.g. "world", "tp", "dp"
  int rank() const { return rank_; }                 // this process's rank in the group
  int size() const { return size_; }                 // ranks in the group
  const CommunicatorOptions& options() const { return options_; }
  // True after a failure or timeout; every later call throws.
  bool broken() const { return !failure_.empty(); }
  virtual std::string_view backend() const = 0;  // "mpi", "nccl", "local"
  virtual Device device() const = 0;             // where its tensors live

  // x ← Σ_r x_r (sum) or (1/R)·Σ_r x_r (avg) over the R ranks, in place; equal on every rank.
  void all_reduce(const Tensor& x, ReduceOp op);
  // output ← chunk rank() of the reduction of input: output[i] = Σ_r input_r[rank()·n + i] (or the
  // mean), n = output.numel(), input.numel() = size()·n. output may be that chunk of input.
  void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op);
  // output ← input_0 ‖ input_1 ‖ … ‖ input_{R−1} (flat), output.numel() = size()·input.numel().
  // input may be chunk rank() of output.
  void all_gather(const Tensor& input, const Tensor& output);
  // x ← x_root on every rank.
  void broadcast(const Tensor& x, int root);
  // Point to point; returns when x may be reused (CPU) or once enqueued (GPU).
  void send(const Tensor& x, int peer);
  void recv(const Tensor& x, int peer);
  // Returns once every rank has called it (and, on GPU backends, all enqueued work is done).
  void barrier();
  // Waits for the operations enqueued so far (GPU backends); CPU backends have nothing to wait for.
  void synchronize();
  // See "Overlap" above. begin_overlap() while overlapping throws std::logic_error.
  void begin_overlap();
  void end_overlap();
  bool overlapping() const { return overlapping_; }

 protected:
  Communicator(std::string name, int rank, int size, CommunicatorOptions options);
  // Validation mode: set by a backend that has an MPI group to compare calls over.
  void set_checker(std::unique_ptr<CollectiveChecker> checker);

  // The engine's part; arguments are already checked (and compared across ranks). A backend may
  // throw std::invalid_argument only before it starts communicating (that leaves it usable).
  virtual void do_all_reduce(const Tensor& x, ReduceOp op) = 0;
  virtual void do_reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) = 0;
  virtual void do_all_gather(const Tensor& input, const Tensor& output) = 0;
  virtual void do_broadcast(const Tensor& x, int root) = 0;
  virtual void do_send(const Tensor& x, int peer) = 0;
  virtual void do_recv(const Tensor& x, int peer) = 0;
  virtual void do_barrier() = 0;
  virtual void do_synchronize() {}
  // Orders the default CUDA stream's later work after the operations enqueued so far.
  virtual void do_end_overlap() {}

 private:
  void check_tensor(const Tensor& t, const CollectiveCall& call, std::string_view role) const;
  void check_rank(int r, const CollectiveCall& call, std::string_view role) const;
  // Compares the call across ranks (validation mode), then runs body; marks the communicator
  // broken when body fails.
  template <class Body>
  void run(const CollectiveCall& call, Body&& body);
  [[noreturn]] void throw_invalid(const CollectiveCall& call, const std::string& problem) const;

  std::string name_;
  int rank_;
  int size_;
  CommunicatorOptions options_;
  std::unique_ptr<CollectiveChecker> checker_;
  std::string failure_;  // non-empty once broken
  bool overlapping_ = false;
};

}  // namespace linea
