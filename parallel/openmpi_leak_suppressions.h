// LeakSanitizer settings for a program that starts Open MPI: include this header in exactly one
// translation unit of the program (the one with main()); it does nothing unless the program is built
// with AddressSanitizer (LINEA_SANITIZE=ON).
// Open MPI 4 does not free all it allocates in MPI_Init (ompi_op_base_op_select, ORTE and libevent
// state, strings of its components), and MPI_Finalize unloads its components (dlclose). At exit
// LeakSanitizer reports those blocks and turns the exit status of a rank that ended well into 1, so
// every mpirun job of an ASan build fails. The suppressions below name the Open MPI libraries; the
// frames of unloaded components print as <unknown module>, so a leak is matched by the Open MPI
// library further up its allocation stack, which only the full unwinder (fast_unwind_on_malloc=0,
// slower allocations) records. Leaks whose stacks do not pass through Open MPI are still reported.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
extern "C" {
// Defaults under ASAN_OPTIONS (which overrides them); called by the ASan runtime at start.
__attribute__((visibility("default"), used)) const char* __asan_default_options() { return "fast_unwind_on_malloc=0"; }
__attribute__((visibility("default"), used)) const char* __lsan_default_suppressions() {
  return "leak:libmpi.so\n"
         "leak:libopen-pal.so\n"
         "leak:libopen-rte.so\n"
         "leak:libevent\n";
}
}
#endif
