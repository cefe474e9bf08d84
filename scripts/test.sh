#!/usr/bin/env bash
# The test command: installs dependencies, builds everything (CUDA too when nvcc is present) as a
# Release build, runs every CPU test with ctest, then builds the unit tests with AddressSanitizer and
# UndefinedBehaviorSanitizer (build-asan/, -O1) and runs them again under them.
# LINEA_SKIP_SANITIZE=1 skips the sanitizer pass; LINEA_SOAK=0 leaves out the chaos soak (label
# `soak`, about 1.5 minutes on two loaded cores).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
LINEA_BUILD_TYPE=${LINEA_BUILD_TYPE:-Release} "$root/scripts/build.sh"
# ctest runs nproc tests at once: one thread each, or OpenMP's and OpenBLAS's threads of every test
# (and of every MPI rank) spin against each other (GlaTraining.*gla_pure: 50 s → 5.5 s on two loaded cores).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
excluded=gpu
[ "${LINEA_SOAK:-1}" = 1 ] || excluded="gpu|soak"
ctest --test-dir "$root/build" --output-on-failure -j "$(nproc)" -LE "$excluded"
if [ "${LINEA_SKIP_SANITIZE:-0}" != 1 ]; then
  LINEA_BUILD_DIR="$root/build-asan" LINEA_BUILD_TYPE=RelWithDebInfo LINEA_TARGETS=unit_tests \
    "$root/scripts/build.sh" -DLINEA_SANITIZE=ON -DLINEA_CUDA=OFF "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
  # The MQAR recall-learning tests (35 and 55 s each in Release, several times that under the
  # sanitizers) are left out of this pass: the shorter MqarTraining tests run the same code under it.
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$root/build-asan" --output-on-failure -j "$(nproc)" -L unit -E "MqarTraining\..*LearnsRecall"
fi
