// error_agreement: makes an error that some ranks found known to all of them.
//
// Before a group of ranks goes on into collectives, each rank passes the error it found locally
// (empty text for none) to gather_errors() / agree_on_errors(); every rank gets back the same
// combined text, "rank 1: <message>; ranks 2, 3: <message>" (ranks with the same message listed
// together; "all N ranks: <message>" when every rank has it), or an empty string when no rank had one.
// Callers then throw on every rank alike (AgreedError), so no rank is left waiting in a collective
// the others have abandoned.
#pragma once
#include <mpi.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>

namespace linea {

class Communicator;

// An error every rank of a group throws alike, with the same text (made from agree_on_errors()).
// A program that catches one on every rank may exit normally; no rank is left in a collective.
class AgreedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Collective over `comm`. Throws CommunicationTimeout (mpi_wait.h) when some rank does not take
// part within `timeout` (0: no limit).
std::string gather_errors(MPI_Comm comm, std::string_view local_error, std::chrono::milliseconds timeout);

// The same over any Communicator (ranks named by their rank in it): one all_gather of the message
// lengths, and a second one of the texts only when some rank has an error.
std::string agree_on_errors(Communicator& comm, std::string_view local_error);

// The errors one rank meets between two meeting points of its group. run(f) calls f and keeps the
// text of the first exception (later calls do nothing until the next agree()); agree(context) is
// collective and makes every rank throw the same AgreedError("<context>: <agreed errors>") when
// any rank kept one. In a group of one there is nobody to tell: run() lets exceptions through
// unchanged and agree() does nothing.
class PendingErrors {
 public:
  explicit PendingErrors(Communicator& group) : group_(group) {}
  template <class F>
  void run(F&& f) {
    if (alone()) return static_cast<void>(f());
    if (!error_.empty()) return;
    try {
      f();
    } catch (const std::exception& e) {
      error_ = e.what();
      if (error_.empty()) error_ = "an exception without a message";
    }
  }
  void agree(std::string_view context);

 private:
  bool alone() const;
  Communicator& group_;
  std::string error_;
};

}  // namespace linea
