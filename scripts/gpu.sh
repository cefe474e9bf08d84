#!/usr/bin/env bash
# Configures, builds and runs linea's GPU tests (ctest -L gpu) and GPU benchmarks on a CUDA
# machine, in one call. Made for the H200 machines lent through the device tool (Ubuntu 24.04,
# nvcc 13, no network, no glog/toml++): the Debian packages that machine lacks travel as .deb files
# in $LINEA_GPU_DEBS and are unpacked with `dpkg -x` into a private prefix, never into /.
# docs/gpu.md says how to fetch them and how to call this.
#
# Environment:
#   LINEA_GPU_DEBS    folder of .deb files to unpack (default: .gpu-deps; skipped when absent)
#   LINEA_GPU_PREFIX  where they are unpacked (default: /tmp/linea-deps)
#   LINEA_BUILD_DIR   build folder (default: build-gpu)
#   LINEA_GPU_LOGS    where logs and benchmark JSON lines go (default: $LINEA_BUILD_DIR/logs)
#   LINEA_GPU_ALL=1   build everything and run every gpu-labelled test (the NCCL MPI tests too)
#   LINEA_GPU_BENCH=0 skip the benchmarks
#   LINEA_GPU_SANITIZE=1 also run every GPU test binary (tests/gpu/**/test_*.cpp, .cu) under memcheck
#   LINEA_GPU_TARGETS="t1 t2"  build only these targets (default: the GPU tests and benchmarks)
#   LINEA_GPU_TESTS=REGEX      run only the gpu-labelled tests whose names match (ctest -R)
#   LINEA_GPU_CMAKE_ARGS="..."  extra configure arguments (e.g. -DCMAKE_CUDA_FLAGS=-lineinfo for ncu's
#                              source view)
# Exit status: nonzero when the build or a test fails (the benchmarks still run after a test
# failure, so that one call brings back everything).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${LINEA_BUILD_DIR:-$root/build-gpu}
logs=${LINEA_GPU_LOGS:-$build/logs}
mkdir -p "$logs"
step() { echo "[gpu.sh] $*"; }

step "machine"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  command -v nvcc && nvcc --version | tail -2
  cmake --version | head -1
  c++ --version | head -1
  nproc
} 2>&1 | tee "$logs/machine.txt"

# ---- dependencies that the machine lacks, unpacked into $prefix --------------------------------
source "$root/scripts/gpu-env.sh"
nvcc_path=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)

# ---- configure and build -------------------------------------------------------------------------
step "configure into $build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLINEA_CUDA=ON \
  -DCMAKE_CUDA_COMPILER="$nvcc_path" -DCMAKE_POLICY_VERSION_MINIMUM=3.5 "${cmake_args[@]}" ${LINEA_GPU_CMAKE_ARGS:-} \
  >"$logs/configure.log" 2>&1
status=$?
if [ $status -ne 0 ]; then
  tail -40 "$logs/configure.log"
  step "configure failed (log: $logs/configure.log)"
  exit $status
fi
targets=(bench_gpu_ops)
gpu_tests=$(find tests/gpu -name 'test_*.cpp' -o -name 'test_*.cu' | sort)
for src in $gpu_tests; do targets+=("$(basename "${src%.*}")"); done
[ "${LINEA_GPU_ALL:-0}" = 1 ] && targets=(all)
[ -n "${LINEA_GPU_TARGETS:-}" ] && read -ra targets <<<"$LINEA_GPU_TARGETS"
step "build ${targets[*]}"
start=$(date +%s)
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >"$logs/build.log" 2>&1
status=$?
step "build took $(($(date +%s) - start)) s"
if [ $status -ne 0 ]; then
  grep -E "error|FAILED" -A5 "$logs/build.log" | head -60
  step "build failed (log: $logs/build.log)"
  exit $status
fi

# ---- tests and benchmarks --------------------------------------------------------------------------
step "ctest -L gpu"
ctest_args=(-L gpu)
[ "${LINEA_GPU_ALL:-0}" = 1 ] || ctest_args+=(-LE mpi)  # the MPI tests are built with everything only
[ -n "${LINEA_GPU_TESTS:-}" ] && ctest_args+=(-R "$LINEA_GPU_TESTS")
ctest --test-dir "$build" "${ctest_args[@]}" --output-on-failure --output-junit "$logs/ctest-gpu.xml" \
  2>&1 | tee "$logs/ctest-gpu.log"
test_status=${PIPESTATUS[0]}
if [ "${LINEA_GPU_SANITIZE:-0}" = 1 ]; then
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for src in $gpu_tests; do
    name=$(basename "${src%.*}")
    step "compute-sanitizer memcheck $name"
    "$sanitizer" --tool memcheck --error-exitcode 1 "$build/tests/$name" --gtest_brief=1 2>&1 |
      tee -a "$logs/sanitizer.log" | tail -3
    [ "${PIPESTATUS[0]}" = 0 ] || test_status=1
  done
fi
if [ "${LINEA_GPU_BENCH:-1}" = 1 ]; then
  for bench in "$build"/bench_gpu_*; do
    [ -x "$bench" ] || continue
    name=$(basename "$bench")
    step "$name"
    "$bench" 2>&1 | tee "$logs/$name.jsonl"
  done
fi
step "done: tests exit status $test_status; logs in $logs"
exit "$test_status"
