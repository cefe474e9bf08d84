// NcclCommunicator: Communicator over NCCL for tensors on this rank's GPU (f32, f64, bf16, i32,
// i64). Compiled only in CUDA builds.
//
// Made collectively over an MPI group: rank 0 creates the ncclUniqueId and broadcasts it over MPI,
// then every rank joins on the calling thread's current CUDA device (ProcessGrid::enable_cuda
// selects it). The NCCL communicator is nonblocking (ncclConfig_t::blocking = 0), so that joining,
// every operation and the final flush can be waited for with options.timeout; when it passes the
// NCCL communicator is aborted (ncclCommAbort) and CommunicationTimeout is thrown, so a rank that
// never comes turns into an error on the others instead of a hang.
// Operations are enqueued on the communicator's own stream and return; synchronize() waits for
// them. The stream does not block on the (legacy) default stream, where the ops run: each operation
// is ordered after the default stream's earlier work by an event recorded there, and, except while
// overlapping (communicator.h), the default stream's later work after it by an event recorded on
// the communicator's stream; end_overlap() records that event once for everything enqueued. Work on
// other streams must be ordered by the caller (an event on stream()). barrier() is synchronize()
// followed by an MPI barrier over the group. Validation mode compares calls over MPI
// (collective_check.h) before enqueuing them.
// Determinism: NCCL gives the same result for the same ranks, topology, sizes and NCCL version, but
// unlike the MPI backend it does not promise a summation order.
#pragma once
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <memory>

#include "parallel/communicator.h"
#include "parallel/mpi_comm.h"

namespace linea {

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(MPI_Comm group, std::string name, CommunicatorOptions options = {});
  ~NcclCommunicator() override;
  std::string_view backend() const override { return "nccl"; }
  Device device() const override { return Device::cuda; }
  cudaStream_t stream() const { return stream_.get(); }
  int cuda_device() const { return cuda_device_; }

 protected:
  void do_all_reduce(const Tensor& x, ReduceOp op) override;
  void do_reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) override;
  void do_all_gather(const Tensor& input, const Tensor& output) override;
  void do_broadcast(const Tensor& x, int root) override;
  void do_send(const Tensor& x, int peer) override;
  void do_recv(const Tensor& x, int peer) override;
  void do_barrier() override;
  void do_synchronize() override;
  void do_end_overlap() override;

 private:
  // Waits while NCCL reports ncclInProgress (nonblocking mode), then throws on any error; aborts
  // the NCCL communicator after options().timeout.
  void settle(ncclResult_t result, const char* what);
  void abort_nccl();
  // Enqueues one NCCL call (`call` returns its ncclResult_t) between the two stream orderings.
  template <class Call>
  void enqueue(Call&& call, const char* what);
  void order_default_stream_after_communication();

  struct StreamDeleter {
    void operator()(cudaStream_t stream) const { cudaStreamDestroy(stream); }
  };
  struct EventDeleter {
    void operator()(cudaEvent_t event) const { cudaEventDestroy(event); }
  };
  using Event = std::unique_ptr<CUevent_st, EventDeleter>;

  MpiComm control_;  // the same group over MPI: id broadcast and barrier
  int cuda_device_ = -1;
  std::unique_ptr<CUstream_st, StreamDeleter> stream_;
  Event compute_done_;        // recorded on the default stream before each operation
  Event communication_done_;  // recorded on stream_ for the default stream to wait on
  ncclComm_t comm_ = nullptr;
};

}  // namespace linea
