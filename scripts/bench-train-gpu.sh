#!/usr/bin/env bash
# End-to-end training throughput on one GPU (bench/bench_train.cpp on configs/bench/*.toml):
#   - the 340M GDN (shared/ANCHORS.md shape) at context 4096, 8 sequences = 32768 tokens per step:
#     tokens/s, MFU and peak GPU memory (targets: ≥ 170K tokens/s, ≤ 32 GiB);
#   - step time at context 32768 (one sequence, the same tokens per step) over context 4096, for the
#     pure GDN (target ≤ 1.05×) and the softmax Transformer++ 340M (≈ 2.9× is the reference);
#   - the 3:1 GDN / attention hybrid 340M at context 4096.
# Prints the benchmark's JSON lines, then one JSON line per ratio. Usage:
#   scripts/bench-train-gpu.sh [BUILD_DIR]      (default build/; the run needs bench_train built)
# Environment: BENCH_STEPS (timed steps, default 20), BENCH_WARMUP (default 3); LINEA_CACHE where
# the embedded corpus is (built there on first use).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bench=$(cd "${1:-$root/build}" && pwd)/bench_train
steps=${BENCH_STEPS:-20}
warmup=${BENCH_WARMUP:-3}
cd "$root"

step_ms() { sed -n 's/.*"step_ms":\([0-9.e+-]*\).*/\1/p' <<<"$1"; }
run() { "$bench" "configs/bench/$1.toml" --warmup "$warmup" --steps "$steps"; }
ratio() {  # name, long line, short line
  awk -v name="$1" -v long="$(step_ms "$2")" -v short="$(step_ms "$3")" \
    'BEGIN { printf "{\"bench\":\"context_ratio\",\"model\":\"%s\",\"step_ms_32k\":%.2f,\"step_ms_4k\":%.2f,\"ratio\":%.3f}\n", name, long, short, long / short }'
}

gdn_4k=$(run gdn-340m-4k) && echo "$gdn_4k"
gdn_32k=$(run gdn-340m-32k) && echo "$gdn_32k"
ratio gdn-340m "$gdn_32k" "$gdn_4k"
tf_4k=$(run transformer-340m-4k) && echo "$tf_4k"
tf_32k=$(run transformer-340m-32k) && echo "$tf_32k"
ratio transformer-340m "$tf_32k" "$tf_4k"
gdn_h_4k=$(run gdn-h-340m-4k) && echo "$gdn_h_4k"
