#include "parallel/cuda/nccl_communicator.h"

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "parallel/collective_check.h"
#include "parallel/mpi_error.h"
#include "parallel/mpi_wait.h"

namespace linea {

namespace {

using Clock = std::chrono::steady_clock;

void check_cuda(cudaError_t error, const std::string& what) {
  if (error != cudaSuccess) throw std::runtime_error(what + ": " + cudaGetErrorString(error));
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
  }
  throw std::invalid_argument("NcclCommunicator: unknown dtype " + std::to_string(static_cast<int>(dtype)));
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::sum ? ncclSum : ncclAvg; }

size_t count(const Tensor& t) { return static_cast<size_t>(t.numel()); }

}  // namespace

NcclCommunicator::NcclCommunicator(MPI_Comm group, std::string name, CommunicatorOptions options)
    : Communicator(name, comm_rank(group), comm_size(group), options),
      control_(MpiComm::duplicate(group, "NCCL communicator '" + name + "'")) {
  const std::string who = "NCCL communicator '" + name + "' rank " + std::to_string(rank());
  check_cuda(cudaGetDevice(&cuda_device_), who + ": cudaGetDevice");
  ncclUniqueId id{};
  if (rank() == 0) settle(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibcast(&id, sizeof id, MPI_BYTE, 0, control_.get(), &request), who + ": MPI_Ibcast of the unique id");
  wait_one(request, options.timeout, who + ": receiving the NCCL unique id from rank 0");
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), who + ": cudaStreamCreateWithFlags");
  stream_.reset(stream);
  for (Event* event : {&compute_done_, &communication_done_}) {
    cudaEvent_t e = nullptr;
    check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), who + ": cudaEventCreateWithFlags");
    event->reset(e);
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t started = ncclCommInitRankConfig(&comm_, size(), id, rank(), &config);
  settle(started, "ncclCommInitRankConfig");
  if (options.validate) set_checker(std::make_unique<CollectiveChecker>(control_.get(), name, options.timeout));
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_) {
    if (broken()) {
      abort_nccl();
    } else {
      try {
        settle(ncclCommFinalize(comm_), "ncclCommFinalize");  // waits for the other ranks, with the timeout
        ncclCommDestroy(comm_);
      } catch (const std::exception&) {
        abort_nccl();
      }
    }
  }
  if (broken()) control_.leak();  // an MPI barrier may still be pending on it
}

void NcclCommunicator::abort_nccl() {
  if (comm_) ncclCommAbort(comm_);
  comm_ = nullptr;
}

void NcclCommunicator::settle(ncclResult_t result, const char* what) {
  const Clock::time_point start = Clock::now();
  while (result == ncclInProgress) {
    if (options().timeout.count() > 0 && Clock::now() - start > options().timeout) {
      abort_nccl();
      throw CommunicationTimeout("NCCL communicator '" + name() + "' rank " + std::to_string(rank()) + ": " + what +
                                 " not complete after " + std::to_string(options().timeout.count()) +
                                 " ms; another rank has failed or is calling a different operation");
    }
    std::this_thread::yield();
    ncclCommGetAsyncError(comm_, &result);
  }
  if (result != ncclSuccess) {
    std::string detail = ncclGetErrorString(result);
    const char* last = ncclGetLastError(comm_);
    if (last && *last) detail += " (" + std::string(last) + ")";
    abort_nccl();
    throw std::runtime_error("NCCL communicator '" + name() + "' rank " + std::to_string(rank()) + ": " + what + ": " +
                             detail);
  }
}

template <class Call>
void NcclCommunicator::enqueue(Call&& call, const char* what) {
  const std::string who = "NCCL communicator '" + name() + "': ";
  check_cuda(cudaEventRecord(compute_done_.get(), cudaStreamLegacy), who + "cudaEventRecord");
  check_cuda(cudaStreamWaitEvent(stream_.get(), compute_done_.get(), 0), who + "cudaStreamWaitEvent");
  settle(call(), what);
  if (!overlapping()) order_default_stream_after_communication();
}

void NcclCommunicator::order_default_stream_after_communication() {
  const std::string who = "NCCL communicator '" + name() + "': ";
  check_cuda(cudaEventRecord(communication_done_.get(), stream_.get()), who + "cudaEventRecord");
  check_cuda(cudaStreamWaitEvent(cudaStreamLegacy, communication_done_.get(), 0), who + "cudaStreamWaitEvent");
}

void NcclCommunicator::do_end_overlap() { order_default_stream_after_communication(); }

void NcclCommunicator::do_all_reduce(const Tensor& x, ReduceOp op) {
  enqueue(
      [&] {
        return ncclAllReduce(x.raw(), x.raw(), count(x), nccl_type(x.dtype()), nccl_op(op), comm_, stream_.get());
      },
      "ncclAllReduce");
}

void NcclCommunicator::do_reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) {
  enqueue(
      [&] {
        return ncclReduceScatter(input.raw(), output.raw(), count(output), nccl_type(input.dtype()), nccl_op(op), comm_,
                                 stream_.get());
      },
      "ncclReduceScatter");
}

void NcclCommunicator::do_all_gather(const Tensor& input, const Tensor& output) {
  enqueue(
      [&] {
        return ncclAllGather(input.raw(), output.raw(), count(input), nccl_type(input.dtype()), comm_, stream_.get());
      },
      "ncclAllGather");
}

void NcclCommunicator::do_broadcast(const Tensor& x, int root) {
  enqueue([&] { return ncclBroadcast(x.raw(), x.raw(), count(x), nccl_type(x.dtype()), root, comm_, stream_.get()); },
          "ncclBroadcast");
}

void NcclCommunicator::do_send(const Tensor& x, int peer) {
  enqueue([&] { return ncclSend(x.raw(), count(x), nccl_type(x.dtype()), peer, comm_, stream_.get()); }, "ncclSend");
}

void NcclCommunicator::do_recv(const Tensor& x, int peer) {
  enqueue([&] { return ncclRecv(x.raw(), count(x), nccl_type(x.dtype()), peer, comm_, stream_.get()); }, "ncclRecv");
}

void NcclCommunicator::do_barrier() {
  do_synchronize();
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibarrier(control_.get(), &request), "NCCL communicator '" + name() + "': MPI_Ibarrier");
  wait_one(request, options().timeout,
           "NCCL communicator '" + name() + "' rank " + std::to_string(rank()) + ": barrier");
}

void NcclCommunicator::do_synchronize() {
  const Clock::time_point start = Clock::now();
  for (;;) {
    const cudaError_t state = cudaStreamQuery(stream_.get());
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady) {
      abort_nccl();
      check_cuda(state, "NCCL communicator '" + name() + "': stream");
    }
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm_, &async);
    if (async != ncclSuccess && async != ncclInProgress) settle(async, "asynchronous NCCL error");
    if (options().timeout.count() > 0 && Clock::now() - start > options().timeout) {
      abort_nccl();
      throw CommunicationTimeout("NCCL communicator '" + name() + "' rank " + std::to_string(rank()) +
                                 ": enqueued operations not complete after " +
                                 std::to_string(options().timeout.count()) +
                                 " ms; another rank has failed or is calling a different operation");
    }
    std::this_thread::yield();
  }
}

}  // namespace linea
