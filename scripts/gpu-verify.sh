#!/usr/bin/env bash
# One device call that checks the tree on the GPU within the call's time limit: builds the GPU test
# binaries and benchmarks (scripts/gpu.sh), runs each test binary under one shared deadline, then
# the 340M GDN step (bench_train) and linea's kernel timings (scripts/gpu-compare.sh linea), and packs
# everything into OUT/verify.tgz after every stage (the device tool brings back few files, and a
# call cut short still brings back what was done). OUT/verify/timeline.txt logs each stage with its
# elapsed seconds and each test binary's gtest summary; a stage that no longer fits is skipped, saying so.
#   scripts/gpu-verify.sh OUT
# Environment:
#   VERIFY_DEADLINE  seconds from the start by which everything has ended (default 560)
#   VERIFY_TESTS     test binaries to build and run, in order (default: every tests/gpu one)
#   VERIFY_BENCH=0   no bench_train and no kernel timings
#   LINEA_CACHE      the folder holding gcide-spm4096/ for bench_train (docs/gpu.md, section 1)
#   and scripts/gpu.sh's (LINEA_GPU_DEBS, LINEA_BUILD_DIR, ...).
# The exit status is nonzero when the build or a test binary failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
out=${1:?usage: scripts/gpu-verify.sh OUT}
dir=$out/verify
mkdir -p "$dir/tests" "$dir/cmp"
build=${LINEA_BUILD_DIR:-$root/build-gpu}
deadline=${VERIFY_DEADLINE:-560}
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
left() { echo $((deadline - $(elapsed))); }
log() { echo "[gpu-verify $(elapsed)s] $*" | tee -a "$dir/timeline.txt"; }
pack() { tar -czf "$out/verify.tgz" -C "$out" verify; }

tests=${VERIFY_TESTS:-$(find tests/gpu \( -name 'test_*.cpp' -o -name 'test_*.cu' \) -exec basename {} \; | sed 's/\.[^.]*$//' | sort)}
targets="$tests"
[ "${VERIFY_BENCH:-1}" = 1 ] && targets="$targets bench_train bench_gpu_delta_rule bench_gpu_gla"
log "build: ${targets//$'\n'/ }"
LINEA_GPU_LOGS=$dir/logs LINEA_GPU_TESTS=NONE LINEA_GPU_BENCH=0 LINEA_GPU_TARGETS="$targets" \
  scripts/gpu.sh >"$dir/gpu-sh.log" 2>&1
status=$?
log "build rc=$status"
pack
[ "$status" -ne 0 ] && exit "$status"
# shellcheck source=scripts/gpu-env.sh
source scripts/gpu-env.sh >/dev/null  # the unpacked glog and gflags on LD_LIBRARY_PATH

for t in $tests; do
  budget=$(($(left) - 60))
  if [ "$budget" -lt 10 ]; then
    log "$t skipped (deadline)"
    continue
  fi
  timeout "$budget" "$build/tests/$t" >"$dir/tests/$t.log" 2>&1
  rc=$?
  [ "$rc" -ne 0 ] && status=$rc
  log "$t rc=$rc $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$dir/tests/$t.log" | tr '\n' ' ')"
  pack
done

if [ "${VERIFY_BENCH:-1}" = 1 ]; then
  if [ "$(left)" -gt 40 ]; then
    timeout $(($(left) - 10)) "$build/bench_train" configs/bench/gdn-340m-4k.toml --warmup 3 --steps 8 \
      >"$dir/bench-train.jsonl" 2>"$dir/bench-train.err"
    log "bench_train rc=$? $(tail -n1 "$dir/bench-train.jsonl" | cut -c1-300)"
  else
    log "bench_train skipped (deadline)"
  fi
  pack
  if [ "$(left)" -gt 20 ]; then
    LINEA_BUILD_DIR=$build timeout $(($(left) - 5)) scripts/gpu-compare.sh linea "$dir/cmp" >"$dir/cmp.log" 2>&1
    log "kernel timings rc=$? ($(grep -vc device "$dir/cmp/linea.jsonl") lines)"
  else
    log "kernel timings skipped (deadline)"
  fi
fi
log "end"
pack
exit "$status"
