// MPI failures as C++ exceptions.
//
// Every communicator linea uses carries MPI_ERRORS_RETURN (set on MPI_COMM_WORLD by MpiSession and
// inherited by the communicators made from it), so a failing MPI call returns its error code
// instead of aborting the job; check_mpi() turns that code into an MpiError whose message names the
// call and gives MPI's own text for the error.
#pragma once
#include <mpi.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace linea {

class MpiError : public std::runtime_error {
 public:
  MpiError(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }  // the MPI error code

 private:
  int code_;
};

// Throws MpiError("<what>: <MPI's error string> (MPI error class N)") unless code == MPI_SUCCESS.
void check_mpi(int code, std::string_view what);

// True between MPI_Init and MPI_Finalize.
bool mpi_is_initialized();

}  // namespace linea
