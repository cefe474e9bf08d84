// error_agreement: makes an error that some ranks found known to all of them.
//
// Before a group of ranks goes on into collectives, each rank passes the error it found locally
// (empty text for none) to gather_errors(); every rank gets back the same combined text,
// "rank 1: <message>; rank 3: <message>", or an empty string when no rank had one. Callers then
// throw on every rank alike, so no rank is left waiting in a collective the others have abandoned.
#pragma once
#include <mpi.h>

#include <chrono>
#include <string>
#include <string_view>

namespace linea {

// Collective over `comm`. Throws CommunicationTimeout (mpi_wait.h) when some rank does not take
// part within `timeout` (0: no limit).
std::string gather_errors(MPI_Comm comm, std::string_view local_error, std::chrono::milliseconds timeout);

}  // namespace linea
