#include "parallel/mpi_error.h"

namespace linea {

void check_mpi(int code, std::string_view what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  int error_class = code;
  MPI_Error_class(code, &error_class);
  throw MpiError(code,
                 std::string(what) + ": " +
                     (length ? std::string(text, static_cast<size_t>(length)) : std::string("unknown MPI error")) +
                     " (MPI error class " + std::to_string(error_class) + ")");
}

bool mpi_is_initialized() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

}  // namespace linea
