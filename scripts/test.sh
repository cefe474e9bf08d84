#!/usr/bin/env bash
# The test command: installs dependencies; builds everything but the unit tests (CUDA too when nvcc
# is present: the GPU tests and benchmarks are compiled, not run) as a Release build into build/ and
# runs its CPU tests with ctest (MPI, fault, soak, script and learning tests); builds the unit tests
# with AddressSanitizer and UndefinedBehaviorSanitizer (build-asan/, -O1) and runs them there. Every
# unit test is compiled and run once, in the sanitizer build: build/ has none (bring them back there
# with `scripts/build.sh -DLINEA_UNIT_TESTS=ON`).
# LINEA_SKIP_SANITIZE=1 skips the sanitizer build and builds and runs the unit tests in build/
# instead; LINEA_SOAK=0 leaves out the chaos soak (label `soak`, about 1.5 minutes on two loaded cores).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
sanitize=$([ "${LINEA_SKIP_SANITIZE:-0}" = 1 ] && echo 0 || echo 1)
LINEA_BUILD_TYPE=${LINEA_BUILD_TYPE:-Release} "$root/scripts/build.sh" \
  -DLINEA_UNIT_TESTS=$([ "$sanitize" = 1 ] && echo OFF || echo ON)

asan_build=(env LINEA_BUILD_DIR="$root/build-asan" LINEA_BUILD_TYPE=RelWithDebInfo LINEA_TARGETS=unit_tests
            "$root/scripts/build.sh" -DLINEA_SANITIZE=ON -DLINEA_CUDA=OFF "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")
# The Release tests mostly wait (on mpirun jobs, heartbeats, timeouts: about 270 CPU-seconds in 360 s
# on two cores), so the sanitizer build starts beside them at the lowest priority, in a process group
# of its own (setsid), its output in build-asan/background.log. When they end it is stopped (ninja
# ends its compilers and keeps what it finished) and carries on in the foreground at normal priority.
stop_background_build() {
  kill -TERM -- "-$background" 2>/dev/null || true
  while kill -0 -- "-$background" 2>/dev/null; do sleep 1; done
}
if [ "$sanitize" = 1 ]; then
  mkdir -p "$root/build-asan"
  setsid nice -n 19 "${asan_build[@]}" >"$root/build-asan/background.log" 2>&1 &
  background=$!
  trap stop_background_build EXIT
fi

# ctest runs nproc tests at once: one thread each, or OpenMP's and OpenBLAS's threads of every test
# (and of every MPI rank) spin against each other (GlaTraining.*gla_pure: 50 s → 5.5 s on two loaded cores).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
excluded=gpu
[ "${LINEA_SOAK:-1}" = 1 ] || excluded="gpu|soak"
ctest --test-dir "$root/build" --output-on-failure -j "$(nproc)" -LE "$excluded"

if [ "$sanitize" = 1 ]; then
  stop_background_build
  trap - EXIT
  "${asan_build[@]}"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$root/build-asan" --output-on-failure -j "$(nproc)" -L unit
fi
