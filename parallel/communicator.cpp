#include "parallel/communicator.h"

#include <stdexcept>

#include "parallel/collective_check.h"

namespace linea {

namespace {

bool is_floating(DType dtype) { return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::bf16; }

// Whether the byte ranges of a and b overlap.
bool overlap(const Tensor& a, const Tensor& b) {
  const auto* a0 = static_cast<const char*>(a.raw());
  const auto* b0 = static_cast<const char*>(b.raw());
  return a.nbytes() && b.nbytes() && a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

// Whether `part` is exactly chunk `index` of `whole` (the in-place layout of reduce_scatter/all_gather).
bool is_chunk(const Tensor& part, const Tensor& whole, int index) {
  return static_cast<const char*>(part.raw()) == static_cast<const char*>(whole.raw()) + index * part.nbytes();
}

}  // namespace

Communicator::Communicator(std::string name, int rank, int size, CommunicatorOptions options)
    : name_(std::move(name)), rank_(rank), size_(size), options_(options) {}

Communicator::~Communicator() {
  if (checker_ && broken()) checker_->abandon();
}

void Communicator::set_checker(std::unique_ptr<CollectiveChecker> checker) { checker_ = std::move(checker); }

void Communicator::throw_invalid(const CollectiveCall& call, const std::string& problem) const {
  throw std::invalid_argument("communicator '" + name_ + "' (" + std::string(backend()) + "), " + call.describe() +
                              ": " + problem);
}

void Communicator::check_tensor(const Tensor& t, const CollectiveCall& call, std::string_view role) const {
  if (!t.defined()) throw_invalid(call, std::string(role) + " is an undefined tensor");
  if (t.device() != device()) {
    throw_invalid(call, std::string(role) + " " + t.describe() + " is not on " + std::string(device_name(device())));
  }
  if (t.numel() && !t.raw()) throw_invalid(call, std::string(role) + " has no storage");
}

void Communicator::check_rank(int r, const CollectiveCall& call, std::string_view role) const {
  if (r < 0 || r >= size_) {
    throw_invalid(call, std::string(role) + " " + std::to_string(r) + " is outside [0, " + std::to_string(size_) + ")");
  }
}

template <class Body>
void Communicator::run(const CollectiveCall& call, Body&& body) {
  if (!failure_.empty()) {
    throw std::runtime_error("communicator '" + name_ + "' (" + std::string(backend()) + "): cannot run " +
                             call.describe() + ", it is unusable after an earlier failure: " + failure_);
  }
  if ((call.kind == CollectiveKind::all_reduce || call.kind == CollectiveKind::reduce_scatter) &&
      call.op == ReduceOp::avg && !is_floating(call.dtype)) {
    throw_invalid(call, "avg needs a floating dtype (f32, f64, bf16)");
  }
  try {
    if (checker_) {
      if (call.kind == CollectiveKind::send || call.kind == CollectiveKind::recv) {
        checker_->check_point_to_point(call);
      } else {
        checker_->check_collective(call);
      }
    }
  } catch (const CollectiveMismatch&) {
    throw;  // every rank involved saw it, and none started the operation: still usable
  } catch (const std::exception& e) {
    failure_ = e.what();
    throw;
  }
  try {
    body();
  } catch (const std::invalid_argument&) {
    throw;  // a backend's own argument check, made before it communicates
  } catch (const std::exception& e) {
    failure_ = e.what();
    throw;
  }
}

void Communicator::all_reduce(const Tensor& x, ReduceOp op) {
  const CollectiveCall call{CollectiveKind::all_reduce, x.dtype(), x.numel(), -1, op};
  check_tensor(x, call, "x");
  run(call, [&] { do_all_reduce(x, op); });
}

void Communicator::reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) {
  const CollectiveCall call{CollectiveKind::reduce_scatter, input.dtype(), input.numel(), -1, op};
  check_tensor(input, call, "input");
  check_tensor(output, call, "output");
  if (output.dtype() != input.dtype()) throw_invalid(call, "output is " + output.describe());
  if (input.numel() != size_ * output.numel()) {
    throw_invalid(call, "input must hold size() × output.numel() = " + std::to_string(size_) + " × " +
                            std::to_string(output.numel()) + " elements");
  }
  if (overlap(input, output) && !is_chunk(output, input, rank_)) {
    throw_invalid(call, "output overlaps input but is not its chunk " + std::to_string(rank_));
  }
  run(call, [&] { do_reduce_scatter(input, output, op); });
}

void Communicator::all_gather(const Tensor& input, const Tensor& output) {
  const CollectiveCall call{CollectiveKind::all_gather, input.dtype(), input.numel(), -1, ReduceOp::sum};
  check_tensor(input, call, "input");
  check_tensor(output, call, "output");
  if (output.dtype() != input.dtype()) throw_invalid(call, "output is " + output.describe());
  if (output.numel() != size_ * input.numel()) {
    throw_invalid(call, "output must hold size() × input.numel() = " + std::to_string(size_) + " × " +
                            std::to_string(input.numel()) + " elements, has " + std::to_string(output.numel()));
  }
  if (overlap(input, output) && !is_chunk(input, output, rank_)) {
    throw_invalid(call, "input overlaps output but is not its chunk " + std::to_string(rank_));
  }
  run(call, [&] { do_all_gather(input, output); });
}

void Communicator::broadcast(const Tensor& x, int root) {
  const CollectiveCall call{CollectiveKind::broadcast, x.dtype(), x.numel(), root, ReduceOp::sum};
  check_tensor(x, call, "x");
  check_rank(root, call, "root");
  run(call, [&] { do_broadcast(x, root); });
}

void Communicator::send(const Tensor& x, int peer) {
  const CollectiveCall call{CollectiveKind::send, x.dtype(), x.numel(), peer, ReduceOp::sum};
  check_tensor(x, call, "x");
  check_rank(peer, call, "peer");
  if (peer == rank_) throw_invalid(call, "a rank cannot send to itself");
  run(call, [&] { do_send(x, peer); });
}

void Communicator::recv(const Tensor& x, int peer) {
  const CollectiveCall call{CollectiveKind::recv, x.dtype(), x.numel(), peer, ReduceOp::sum};
  check_tensor(x, call, "x");
  check_rank(peer, call, "peer");
  if (peer == rank_) throw_invalid(call, "a rank cannot receive from itself");
  run(call, [&] { do_recv(x, peer); });
}

void Communicator::barrier() {
  run(CollectiveCall{}, [&] { do_barrier(); });
}

void Communicator::synchronize() {
  if (!failure_.empty()) {
    throw std::runtime_error("communicator '" + name_ + "' (" + std::string(backend()) +
                             "): unusable after an earlier failure: " + failure_);
  }
  try {
    do_synchronize();
  } catch (const std::exception& e) {
    failure_ = e.what();
    throw;
  }
}

void Communicator::begin_overlap() {
  if (overlapping_) throw std::logic_error("communicator '" + name_ + "': begin_overlap() while already overlapping");
  overlapping_ = true;
}

void Communicator::end_overlap() {
  if (!overlapping_) return;
  overlapping_ = false;
  if (!failure_.empty()) return;  // nothing more will run on it
  try {
    do_end_overlap();
  } catch (const std::exception& e) {
    failure_ = e.what();
    throw;
  }
}

}  // namespace linea
