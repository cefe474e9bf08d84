#!/usr/bin/env bash
# Times linea's GPU kernels and fla's Triton kernels in one device call, one after the other (never
# both at once: each would disturb the other's timings), and prints fla / linea ratios
# (bench/fla_compare.py). Run on the GPU machine after scripts/gpu.sh built bench_gpu_delta_rule and
# bench_gpu_gla (docs/gpu.md, "Timing beside fla").
#   scripts/gpu-compare.sh fla OUT      fla's timings into OUT/fla.jsonl
#   scripts/gpu-compare.sh linea OUT    linea's timings into OUT/linea.jsonl
#   scripts/gpu-compare.sh report OUT   the ratios into OUT/ratios.jsonl (and stdout)
#   scripts/gpu-compare.sh all OUT      the three in turn
# fla compiles and autotunes each Triton kernel on a fresh machine (minutes; CPU-bound while it
# compiles): its phase can run beside the build, as a process group of its own that the caller
# waits for before the linea phase (`setsid scripts/gpu-compare.sh fla OUT & ...; wait`).
# Environment: FLA_SRC (fla's source folder, default .gpu-fla), FLA_AUTOTUNE (a tar of Triton's
# *.autotune.json files, restored before fla runs where it exists and written again after it: the
# kernels then compile at their chosen configurations without autotuning; default
# .gpu-run/autotune.tar), FLA_PRECOMPILE (default 1: the compile pass below; 0 leaves it out),
# LINEA_BUILD_DIR (default build-gpu), COMPARE_T (default 4096),
# DR_OPS (default gdn,deltanet), DR_SHAPES (default anchors,340m), GLA_OPS (default
# gla,retnet,mamba2,rwkv6), ITERATIONS (linea's timed launches, default 10).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
phase=${1:?usage: scripts/gpu-compare.sh fla|linea|report|all OUT}
out=${2:?usage: scripts/gpu-compare.sh fla|linea|report|all OUT}
mkdir -p "$out"
export FLA_SRC=${FLA_SRC:-$root/.gpu-fla} TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/triton}
autotune=${FLA_AUTOTUNE:-$root/.gpu-run/autotune.tar}
build=${LINEA_BUILD_DIR:-$root/build-gpu}
T=${COMPARE_T:-4096}
dr_ops=${DR_OPS:-gdn,deltanet} dr_shapes=${DR_SHAPES:-anchors,340m} gla_ops=${GLA_OPS:-gla,retnet,mamba2,rwkv6}
say() { echo "[gpu-compare $(date +%T)] $*" >&2; }

# Triton's autotune results in TRITON_CACHE_DIR, as paths relative to it.
autotune_results() { (cd "$TRITON_CACHE_DIR" && find . -name '*.autotune.json' | sort); }
# Triton's autotune results so far into OUT/autotune.tar (after every op: a phase killed at a
# deadline keeps what it had chosen).
keep_autotune() { autotune_results | (cd "$TRITON_CACHE_DIR" && tar -cf "$out/autotune.tar" -T -); }

# The compile pass: every fla op (and delta-rule head shape) in a process of its own, all at once,
# so that Triton compiles their kernels on every core instead of one op after another on one. Its
# timings are thrown away, and so are the autotune choices it made: they were timed on a shared
# GPU. The timing pass then autotunes again on a quiet GPU from the kernels compiled here (Triton
# keeps them in TRITON_CACHE_DIR), so its choices and timings are those of a pass alone.
precompile() {
  local before=$out/autotune-before.txt pids=() op shape
  autotune_results >"$before"
  for op in ${dr_ops//,/ }; do
    for shape in ${dr_shapes//,/ }; do
      python3 bench/fla_delta_rule.py "$T" "$op" "$shape" >/dev/null 2>>"$out/fla-compile.err" &
      pids+=($!)
    done
  done
  for op in ${gla_ops//,/ }; do
    python3 bench/fla_gla_family.py "$T" "$op" >/dev/null 2>>"$out/fla-compile.err" &
    pids+=($!)
  done
  say "compile pass: ${#pids[@]} processes"
  [ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"
  autotune_results | comm -13 "$before" - | (cd "$TRITON_CACHE_DIR" && xargs -r rm -f)
  rm -f "$before"
  say "compile pass done; its autotune choices dropped"
}

fla() {
  mkdir -p "$TRITON_CACHE_DIR"
  [ -f "$autotune" ] && tar -xf "$autotune" -C "$TRITON_CACHE_DIR" && say "restored $(tar -tf "$autotune" | wc -l) autotune results"
  [ "${FLA_PRECOMPILE:-1}" = 1 ] && precompile
  : >"$out/fla.jsonl"
  for op in ${dr_ops//,/ }; do
    say "fla delta rule $op"
    python3 -u bench/fla_delta_rule.py "$T" "$op" "$dr_shapes" >>"$out/fla.jsonl" 2>>"$out/fla.err"
    keep_autotune
  done
  for op in ${gla_ops//,/ }; do
    say "fla $op"
    python3 -u bench/fla_gla_family.py "$T" "$op" >>"$out/fla.jsonl" 2>>"$out/fla.err"
    keep_autotune
  done
  say "fla done; autotune results in $out/autotune.tar"
}

linea() {
  source "$root/scripts/gpu-env.sh" >/dev/null  # the unpacked glog and gflags on LD_LIBRARY_PATH
  : >"$out/linea.jsonl"
  for op in ${dr_ops//,/ }; do
    for shape in ${dr_shapes//,/ }; do
      say "linea delta rule $op $shape"
      "$build/bench_gpu_delta_rule" "${ITERATIONS:-10}" "$op" "$T" "$shape" >>"$out/linea.jsonl" 2>>"$out/linea.err"
    done
  done
  for op in ${gla_ops//,/ }; do
    say "linea $op"
    "$build/bench_gpu_gla" "${ITERATIONS:-10}" "$op" "$T" >>"$out/linea.jsonl" 2>>"$out/linea.err"
  done
}

report() { python3 bench/fla_compare.py "$out/linea.jsonl" "$out/fla.jsonl" | tee "$out/ratios.jsonl"; }

case $phase in
  fla) fla ;;
  linea) linea ;;
  report) report ;;
  all) fla; linea; report ;;
  *) echo "scripts/gpu-compare.sh: unknown phase '$phase' (expected fla, linea, report or all)" >&2; exit 2 ;;
esac
