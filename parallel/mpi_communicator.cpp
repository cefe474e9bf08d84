#include "parallel/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>

#include "parallel/collective_check.h"
#include "parallel/mpi_error.h"
#include "parallel/mpi_wait.h"
#include "parallel/ordered_reduce.h"

namespace linea {

namespace {

constexpr int kDataTag = 7300;

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::bf16: return MPI_UINT16_T;  // moved as bits; reductions are ours (ordered_reduce)
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
  }
  throw std::invalid_argument("MpiCommunicator: unknown dtype " + std::to_string(static_cast<int>(dtype)));
}

// Run j of n elements split into `parts` runs: ⌊n/parts⌋ elements, plus one for j < n mod parts.
void split_evenly(int64_t n, int parts, std::vector<int>& counts, std::vector<int>& displacements) {
  counts.resize(static_cast<size_t>(parts));
  displacements.resize(static_cast<size_t>(parts));
  int64_t offset = 0;
  for (int j = 0; j < parts; ++j) {
    const int64_t count = n / parts + (j < n % parts ? 1 : 0);
    counts[static_cast<size_t>(j)] = static_cast<int>(count);
    displacements[static_cast<size_t>(j)] = static_cast<int>(offset);
    offset += count;
  }
}

char* bytes(const Tensor& t) { return static_cast<char*>(t.raw()); }

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm group, std::string name, CommunicatorOptions options)
    : Communicator(name, comm_rank(group), comm_size(group), options),
      comm_(MpiComm::duplicate(group, "communicator '" + name + "'")) {
  check_mpi(MPI_Comm_set_errhandler(comm_.get(), MPI_ERRORS_RETURN), "communicator '" + name + "': set errhandler");
  if (options.max_piece_bytes < 8 || options.max_piece_bytes > INT_MAX) {
    throw std::invalid_argument("communicator '" + name + "': max_piece_bytes must be in [8, 2^31), got " +
                                std::to_string(options.max_piece_bytes));
  }
  if (options.validate) set_checker(std::make_unique<CollectiveChecker>(comm_.get(), name, options.timeout));
}

MpiCommunicator::~MpiCommunicator() {
  if (broken()) comm_.leak();
}

int64_t MpiCommunicator::piece_elements(DType dtype) const {
  return options().max_piece_bytes / static_cast<int64_t>(dtype_size(dtype));
}

void MpiCommunicator::wait(MPI_Request& request, const char* what, const Tensor& t) {
  wait_one(request, options().timeout,
           "communicator '" + name() + "' (mpi) rank " + std::to_string(rank()) + ": " + what + " of " + t.describe());
}

void MpiCommunicator::reduce_to_owners(const char* send, const std::vector<int>& counts,
                                       const std::vector<int>& displacements, char* out, DType dtype, ReduceOp op,
                                       const char* what) {
  const int mine = counts[static_cast<size_t>(rank())];
  const size_t element = dtype_size(dtype);
  scratch_.resize(static_cast<size_t>(size()) * static_cast<size_t>(mine) * element);
  std::vector<int> receive_counts(static_cast<size_t>(size()), mine),
      receive_displacements(static_cast<size_t>(size()));
  for (int r = 0; r < size(); ++r) receive_displacements[static_cast<size_t>(r)] = r * mine;
  MPI_Request request = MPI_REQUEST_NULL;
  const MPI_Datatype type = mpi_type(dtype);
  check_mpi(MPI_Ialltoallv(send, counts.data(), displacements.data(), type, scratch_.data(), receive_counts.data(),
                           receive_displacements.data(), type, comm_.get(), &request),
            std::string("communicator '") + name() + "': MPI_Ialltoallv in " + what);
  wait_one(request, options().timeout,
           "communicator '" + name() + "' (mpi) rank " + std::to_string(rank()) + ": exchange of chunks in " + what);
  ordered_reduce(dtype, scratch_.data(), size(), mine, op, out);
}

void MpiCommunicator::do_all_reduce(const Tensor& x, ReduceOp op) {
  const size_t element = dtype_size(x.dtype());
  const MPI_Datatype type = mpi_type(x.dtype());
  std::vector<int> counts, displacements;
  for (int64_t offset = 0; offset < x.numel(); offset += piece_elements(x.dtype())) {
    const int64_t length = std::min(piece_elements(x.dtype()), x.numel() - offset);
    char* piece = bytes(x) + offset * static_cast<int64_t>(element);
    split_evenly(length, size(), counts, displacements);
    char* my_chunk = piece + static_cast<int64_t>(displacements[static_cast<size_t>(rank())]) * element;
    reduce_to_owners(piece, counts, displacements, my_chunk, x.dtype(), op, "all_reduce");
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, piece, counts.data(), displacements.data(), type,
                              comm_.get(), &request),
              "communicator '" + name() + "': MPI_Iallgatherv in all_reduce");
    wait(request, "all-gather of reduced chunks in all_reduce", x);
  }
}

void MpiCommunicator::do_reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) {
  if (input.numel() > INT_MAX) {
    throw std::invalid_argument("communicator '" + name() + "' (mpi): reduce_scatter input " + input.describe() +
                                " has more elements than MPI's int displacements reach; split the call");
  }
  const size_t element = dtype_size(input.dtype());
  const int64_t n = output.numel();
  const int64_t max_piece = std::max<int64_t>(1, piece_elements(input.dtype()) / size());
  std::vector<int> counts(static_cast<size_t>(size())), displacements(static_cast<size_t>(size()));
  for (int j = 0; j < size(); ++j) displacements[static_cast<size_t>(j)] = static_cast<int>(j * n);
  for (int64_t offset = 0; offset < n; offset += max_piece) {
    std::fill(counts.begin(), counts.end(), static_cast<int>(std::min(max_piece, n - offset)));
    const int64_t byte_offset = offset * static_cast<int64_t>(element);
    reduce_to_owners(bytes(input) + byte_offset, counts, displacements, bytes(output) + byte_offset, input.dtype(), op,
                     "reduce_scatter");
  }
}

void MpiCommunicator::do_all_gather(const Tensor& input, const Tensor& output) {
  if (output.numel() > INT_MAX) {
    throw std::invalid_argument("communicator '" + name() + "' (mpi): all_gather output " + output.describe() +
                                " has more elements than MPI's int counts reach; split the call");
  }
  const bool in_place = bytes(input) == bytes(output) + rank() * input.nbytes();
  const MPI_Datatype type = mpi_type(input.dtype());
  const int count = static_cast<int>(input.numel());
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallgather(in_place ? MPI_IN_PLACE : input.raw(), in_place ? 0 : count,
                           in_place ? MPI_DATATYPE_NULL : type, output.raw(), count, type, comm_.get(), &request),
            "communicator '" + name() + "': MPI_Iallgather");
  wait(request, "all_gather", input);
}

void MpiCommunicator::do_broadcast(const Tensor& x, int root) {
  const size_t element = dtype_size(x.dtype());
  for (int64_t offset = 0; offset < x.numel(); offset += piece_elements(x.dtype())) {
    const int count = static_cast<int>(std::min(piece_elements(x.dtype()), x.numel() - offset));
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Ibcast(bytes(x) + offset * static_cast<int64_t>(element), count, mpi_type(x.dtype()), root,
                         comm_.get(), &request),
              "communicator '" + name() + "': MPI_Ibcast");
    wait(request, "broadcast", x);
  }
}

void MpiCommunicator::do_send(const Tensor& x, int peer) {
  const size_t element = dtype_size(x.dtype());
  for (int64_t offset = 0; offset < x.numel(); offset += piece_elements(x.dtype())) {
    const int count = static_cast<int>(std::min(piece_elements(x.dtype()), x.numel() - offset));
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Isend(bytes(x) + offset * static_cast<int64_t>(element), count, mpi_type(x.dtype()), peer, kDataTag,
                        comm_.get(), &request),
              "communicator '" + name() + "': MPI_Isend to rank " + std::to_string(peer));
    wait(request, ("send to rank " + std::to_string(peer)).c_str(), x);
  }
}

void MpiCommunicator::do_recv(const Tensor& x, int peer) {
  const size_t element = dtype_size(x.dtype());
  for (int64_t offset = 0; offset < x.numel(); offset += piece_elements(x.dtype())) {
    const int count = static_cast<int>(std::min(piece_elements(x.dtype()), x.numel() - offset));
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Irecv(bytes(x) + offset * static_cast<int64_t>(element), count, mpi_type(x.dtype()), peer, kDataTag,
                        comm_.get(), &request),
              "communicator '" + name() + "': MPI_Irecv from rank " + std::to_string(peer));
    wait(request, ("receive from rank " + std::to_string(peer)).c_str(), x);
  }
}

void MpiCommunicator::do_barrier() {
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibarrier(comm_.get(), &request), "communicator '" + name() + "': MPI_Ibarrier");
  wait_one(request, options().timeout,
           "communicator '" + name() + "' (mpi) rank " + std::to_string(rank()) + ": barrier");
}

}  // namespace linea
