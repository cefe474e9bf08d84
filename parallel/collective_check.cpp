#include "parallel/collective_check.h"

#include <vector>

#include "parallel/mpi_error.h"
#include "parallel/mpi_wait.h"

namespace linea {

namespace {

// A CollectiveCall as it travels between ranks (same binary on every rank, so raw bytes will do).
struct WireCall {
  int64_t count;
  uint64_t number;
  int32_t peer;
  uint8_t kind, dtype, op, unused;
};
static_assert(sizeof(WireCall) == 24);

WireCall to_wire(const CollectiveCall& call, uint64_t number) {
  return WireCall{call.count,
                  number,
                  call.peer,
                  static_cast<uint8_t>(call.kind),
                  static_cast<uint8_t>(call.dtype),
                  static_cast<uint8_t>(call.op),
                  0};
}

CollectiveCall from_wire(const WireCall& wire) {
  return CollectiveCall{static_cast<CollectiveKind>(wire.kind), static_cast<DType>(wire.dtype), wire.count, wire.peer,
                        static_cast<ReduceOp>(wire.op)};
}

// Whether two ranks' calls can be the same collective.
bool same_collective(const WireCall& a, const WireCall& b) {
  if (a.kind != b.kind || a.number != b.number) return false;
  const auto kind = static_cast<CollectiveKind>(a.kind);
  if (kind == CollectiveKind::barrier) return true;
  if (a.dtype != b.dtype || a.count != b.count) return false;
  if (kind == CollectiveKind::broadcast && a.peer != b.peer) return false;
  if ((kind == CollectiveKind::all_reduce || kind == CollectiveKind::reduce_scatter) && a.op != b.op) return false;
  return true;
}

constexpr int kPointToPointTag = 7301;

}  // namespace

CollectiveChecker::CollectiveChecker(MPI_Comm group, std::string communicator_name, std::chrono::milliseconds timeout)
    : control_(MpiComm::duplicate(group, "collective checker of '" + communicator_name + "'")),
      name_(std::move(communicator_name)),
      timeout_(timeout),
      rank_(control_.rank()) {}

void CollectiveChecker::check_collective(const CollectiveCall& call) {
  const uint64_t number = collective_count_++;
  const WireCall mine = to_wire(call, number);
  std::vector<WireCall> all(static_cast<size_t>(control_.size()));
  MPI_Request request = MPI_REQUEST_NULL;
  const std::string what = "communicator '" + name_ + "': comparing " + call.describe() + " across ranks";
  check_mpi(MPI_Iallgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, control_.get(), &request),
            what);
  wait_one(request, timeout_, what);

  bool agree = true;
  for (const WireCall& other : all) agree = agree && same_collective(other, all.front());
  if (agree) return;
  std::string message = "communicator '" + name_ + "': ranks disagree on a collective call:";
  for (size_t r = 0; r < all.size(); ++r) {
    message += (r ? "; rank " : " rank ") + std::to_string(r) + " call #" + std::to_string(all[r].number) + " " +
               from_wire(all[r]).describe();
  }
  throw CollectiveMismatch(message);
}

void CollectiveChecker::check_point_to_point(const CollectiveCall& call) {
  const WireCall mine = to_wire(call, 0);
  WireCall theirs{};
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  const std::string what =
      "communicator '" + name_ + "': comparing " + call.describe() + " with rank " + std::to_string(call.peer);
  check_mpi(MPI_Isend(&mine, sizeof mine, MPI_BYTE, call.peer, kPointToPointTag, control_.get(), &requests[0]), what);
  check_mpi(MPI_Irecv(&theirs, sizeof theirs, MPI_BYTE, call.peer, kPointToPointTag, control_.get(), &requests[1]),
            what);
  wait_all(requests, timeout_, what);

  const CollectiveKind counterpart = call.kind == CollectiveKind::send ? CollectiveKind::recv : CollectiveKind::send;
  const bool pair = static_cast<CollectiveKind>(theirs.kind) == counterpart && theirs.peer == rank_ &&
                    theirs.dtype == mine.dtype && theirs.count == mine.count;
  if (pair) return;
  throw CollectiveMismatch("communicator '" + name_ + "': rank " + std::to_string(rank_) + " calls " + call.describe() +
                           " but rank " + std::to_string(call.peer) + " calls " + from_wire(theirs).describe());
}

}  // namespace linea
