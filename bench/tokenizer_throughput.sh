#!/usr/bin/env bash
# `linea prepare` against Hugging Face tokenizers and tiktoken on one machine's CPUs (a device
# machine: docs/gpu.md): builds `linea` CPU-only into $LINEA_BUILD_DIR (default build-cpu) with the
# packages scripts/gpu-env.sh unpacks, then runs bench/tokenizer_throughput.py on TEXT (a gzip'd
# text, default /usr/share/dictd/gcide.dict.dz) with every core; prints its JSON lines.
#   LINEA_GPU_DEBS=../.gpu-deps bench/tokenizer_throughput.sh [TEXT]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${LINEA_BUILD_DIR:-$root/build-cpu}
text=${1:-/usr/share/dictd/gcide.dict.dz}
work=${LINEA_BENCH_WORK:-/tmp/linea-tokenizer-bench}
mkdir -p "$work"
source "$root/scripts/gpu-env.sh"
start=$(date +%s)
if ! cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLINEA_CUDA=OFF -DLINEA_TESTS=OFF \
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5 "${cmake_args[@]}" >"$work/configure.log" 2>&1; then
  tail -30 "$work/configure.log"
  exit 1
fi
if ! cmake --build "$build" -j "$(nproc)" --target linea >"$work/build.log" 2>&1; then
  grep -E "error|FAILED" -A5 "$work/build.log" | head -40
  exit 1
fi
echo "[tokenizer_throughput] linea built in $(($(date +%s) - start)) s"
python3 "$root/bench/tokenizer_throughput.py" --linea "$build/linea" --text "$text" --threads "$(nproc)" --work "$work"
