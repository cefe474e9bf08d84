#!/usr/bin/env bash
# How long a sweep's training takes on this machine, measured: every run that `linea submit
# --dry-run` expands the sweep into is timed by bench_train for a few steps (its own config and
# overrides: same model, batch, context, optimizer and schedule), and its train.steps are projected
# at the median step time. Evaluations, checkpoints and start-up are left out. Prints bench_train's
# JSON line per run (with "run" added), then one line with the total. Usage:
#   scripts/time-sweep.sh SWEEP.toml [BUILD_DIR]   (default build/; needs linea and bench_train)
# Environment: TIME_STEPS (timed steps a run, default 8), TIME_WARMUP (default 3). A data.path that
# does not exist here (a sweep's placeholder for FineWeb-Edu shards) is dropped, so that the run
# reads the embedded corpus instead: the step time does not depend on which tokens it reads.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: scripts/time-sweep.sh SWEEP.toml [BUILD_DIR]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
sweep=$1
build=$(cd "${2:-$root/build}" && pwd)
steps=${TIME_STEPS:-8}
warmup=${TIME_WARMUP:-3}
for tool in linea bench_train; do
  [ -x "$build/$tool" ] || { echo "time-sweep: $build/$tool is not built" >&2; exit 2; }
done

runs=$("$build/linea" submit "$sweep" --dry-run | grep ' np=')
count=$(wc -l <<<"$runs")
total=0
index=0
while read -r label np config overrides_text; do
  index=$((index + 1))
  [ "$np" = "np=1" ] || echo "time-sweep: $label asks for $np ranks; timed on one" >&2
  read -ra overrides <<<"$overrides_text"
  kept=()
  for o in "${overrides[@]}"; do
    case $o in
      run.dir=* | run.name=*) ;;
      data.path=*)
        path=${o#data.path=}
        path=${path//\"/}
        if [ -e "$path" ]; then kept+=("$o"); else echo "time-sweep: $label: no $path here, timing on the embedded corpus" >&2; fi
        ;;
      *) kept+=("$o") ;;
    esac
  done
  echo "time-sweep: [$index/$count] $label" >&2
  line=$("$build/bench_train" "$config" --warmup "$warmup" --steps "$steps" "${kept[@]}")
  echo "{\"run\":\"$label\",${line#\{}"
  seconds=$(sed -n 's/.*"projected_run_s":\([0-9.e+-]*\).*/\1/p' <<<"$line")
  total=$(awk -v a="$total" -v b="$seconds" 'BEGIN { printf "%.1f", a + b }')
done <<<"$runs"
awk -v sweep="$sweep" -v runs="$count" -v total="$total" \
  'BEGIN { printf "{\"bench\":\"sweep_time\",\"sweep\":\"%s\",\"runs\":%d,\"projected_train_s\":%.1f,\"projected_train_h\":%.3f}\n", sweep, runs, total, total / 3600 }'
