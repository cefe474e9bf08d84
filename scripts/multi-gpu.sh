#!/usr/bin/env bash
# Multi-GPU checks of `linea train` on one host (issue 7), in one call; docs/multi-gpu.md says how
# to run it through the device tool. With N GPUs (nvidia-smi -L, or LINEA_GPUS):
#   correctness  a small GDN / attention hybrid with Muon (configs/multi-gpu/correctness.toml), 20
#                steps on 1 GPU, then as TP × DP = 1×2, 2×1, 2×2, 1×4, 2×4, 1×8 (those that fit N),
#                same seed and global batch; each layout's loss, step by step, against the 1-GPU run
#                (`linea compare-runs`, relative tolerance LINEA_MULTI_GPU_TOLERANCE);
#   resume       stopped at step 10 under one layout and resumed under another (2×2 → 1×4 with
#                N ≥ 4, 1×2 → 2×1 with N = 2 or 3), against the 1-GPU run;
#   scaling      configs/models/{gdn-340m,gdn-1.3b}.toml at context 4096 on 1, 2, 4, 8 GPUs as DP
#                and as TP = 2 × DP (weak scaling: the same sequences per DP replica), tokens/s per
#                GPU after the warm-up steps (`linea throughput`), efficiency against 1 GPU
#                (targets: DP ≥ 0.95 and TP = 2 ≥ 0.85 at 8 GPUs), rank 0's peak GPU memory;
#   large        configs/models/gdn-3b.toml under TP × DP on all N GPUs, TP = min(N, 2) or
#                LINEA_MULTI_GPU_LARGE_TP (N must be a multiple of it):
#                does it fit and train; tokens/s per GPU and rank 0's peak GPU memory.
# Writes $LINEA_MULTI_GPU_OUT/results.jsonl (one JSON line per layout or run, also printed),
# report.md (the tables), runs/ (every run directory) and logs/ (every job's output). Exit status
# 0 when every correctness and resume layout passed and every job that started finished (jobs
# skipped for the deadline are reported, not counted), 1 otherwise, 2 on bad settings.
#
# Environment:
#   LINEA_MULTI_GPU_OUT       where everything goes (default ./multi-gpu-out); must be new or empty
#   LINEA_BIN                 the linea binary (default build-gpu/linea, else build/linea)
#   LINEA_GPUS                the GPU count (default: nvidia-smi -L); needed with device cpu (ranks)
#   LINEA_MULTI_GPU_DEVICE    cuda (default) or cpu: cpu runs configs/multi-gpu/correctness-tiny.toml
#                             and configs/models/tiny.toml in f32 so the script can be tested anywhere
#   LINEA_MULTI_GPU_PARTS     which parts, in order (default "correctness resume scaling large")
#   LINEA_MULTI_GPU_DATA      data.path for every run (default: the embedded corpus, in $LINEA_CACHE)
#   LINEA_MULTI_GPU_OVERRIDES more section.key=value overrides for every run (after the script's
#                             own, before each job's layout), e.g. "data.vocab_size=64 data.eos_id=0"
#   LINEA_MULTI_GPU_TOLERANCE relative loss tolerance (default 1e-2 in bf16, 2e-4 in f32)
#   LINEA_MULTI_GPU_SCALING_MODELS  model names of configs/models/ (default "gdn-340m gdn-1.3b";
#                             cpu: "tiny"); LINEA_MULTI_GPU_LARGE_MODEL (default gdn-3b; cpu: tiny)
#   LINEA_MULTI_GPU_SEQ_LEN   scaling context (default 4096; cpu 128)
#   LINEA_MULTI_GPU_SEQS      sequences per DP replica per step (default 8; cpu 2);
#   LINEA_MULTI_GPU_MICRO     sequences per micro-batch (default 4; cpu 1); LINEA_MULTI_GPU_LARGE_MICRO
#                             for the large model (default 2; cpu 1); LINEA_MULTI_GPU_LARGE_TP its TP
#                             size (default 2)
#   LINEA_MULTI_GPU_RESUME    the resume's layouts, "TPxDP TPxDP" (default "2x2 1x4" with 4 GPUs or
#                             more, "1x2 2x1" with 2 or 3)
#   LINEA_MULTI_GPU_WARMUP, LINEA_MULTI_GPU_MEASURE  scaling steps left out / measured (default 2, 6)
#   LINEA_MULTI_GPU_DEADLINE_S  skip the runs that would start later than this many seconds after
#                             the script started (default 0: no deadline); they are reported skipped
#   LINEA_MULTI_GPU_RUN_TIMEOUT_S  a job still running after this is ended (default 300)
#   LINEA_GPU_PREFIX          where scripts/gpu.sh unpacked glog and toml++ (default /tmp/linea-deps);
#                             its libraries are put on LD_LIBRARY_PATH
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
start_time=$(date +%s)
die() {
  echo "multi-gpu.sh: error: $*" >&2
  exit 2
}

# ---- settings ----------------------------------------------------------------------------------
device=${LINEA_MULTI_GPU_DEVICE:-cuda}
case "$device" in
  cuda)
    correctness_config=$root/configs/multi-gpu/correctness.toml
    precision=(train.precision=bf16)
    tolerance=${LINEA_MULTI_GPU_TOLERANCE:-1e-2}
    scaling_models=${LINEA_MULTI_GPU_SCALING_MODELS:-gdn-340m gdn-1.3b}
    large_model=${LINEA_MULTI_GPU_LARGE_MODEL:-gdn-3b}
    seq_len=${LINEA_MULTI_GPU_SEQ_LEN:-4096}
    seqs=${LINEA_MULTI_GPU_SEQS:-8}
    micro=${LINEA_MULTI_GPU_MICRO:-4}
    large_micro=${LINEA_MULTI_GPU_LARGE_MICRO:-2}
    ;;
  cpu)
    correctness_config=$root/configs/multi-gpu/correctness-tiny.toml
    precision=()
    tolerance=${LINEA_MULTI_GPU_TOLERANCE:-2e-4}
    scaling_models=${LINEA_MULTI_GPU_SCALING_MODELS:-tiny}
    large_model=${LINEA_MULTI_GPU_LARGE_MODEL:-tiny}
    seq_len=${LINEA_MULTI_GPU_SEQ_LEN:-128}
    seqs=${LINEA_MULTI_GPU_SEQS:-2}
    micro=${LINEA_MULTI_GPU_MICRO:-1}
    large_micro=${LINEA_MULTI_GPU_LARGE_MICRO:-1}
    ;;
  *) die "LINEA_MULTI_GPU_DEVICE: expected cuda or cpu, got '$device'" ;;
esac
parts=${LINEA_MULTI_GPU_PARTS:-correctness resume scaling large}
for part in $parts; do
  case "$part" in correctness | resume | scaling | large) ;; *) die "LINEA_MULTI_GPU_PARTS: unknown part '$part' (expected correctness, resume, scaling, large)" ;; esac
done
large_tp=${LINEA_MULTI_GPU_LARGE_TP:-2}
resume_layouts=${LINEA_MULTI_GPU_RESUME:-}
layout_pattern='^[1-9][0-9]*x[1-9][0-9]*$'
if [ -n "$resume_layouts" ]; then
  read -r first second rest <<<"$resume_layouts"
  [[ $first =~ $layout_pattern && ${second:-} =~ $layout_pattern && -z ${rest:-} ]] ||
    die "LINEA_MULTI_GPU_RESUME: expected two layouts TPxDP TPxDP (e.g. \"2x2 1x4\"), got '$resume_layouts'"
fi
warmup=${LINEA_MULTI_GPU_WARMUP:-2}
measure=${LINEA_MULTI_GPU_MEASURE:-6}
deadline=${LINEA_MULTI_GPU_DEADLINE_S:-0}
run_timeout=${LINEA_MULTI_GPU_RUN_TIMEOUT_S:-300}
data=${LINEA_MULTI_GPU_DATA:-default}
read -ra extra_overrides <<<"${LINEA_MULTI_GPU_OVERRIDES:-}"
for name in warmup measure deadline run_timeout seqs micro large_micro large_tp seq_len; do
  [[ ${!name} =~ ^[0-9]+$ ]] || die "$name: expected a whole number, got '${!name}'"
done
[ "$large_tp" -ge 1 ] || die "LINEA_MULTI_GPU_LARGE_TP: expected a TP size >= 1, got $large_tp"
[ "$measure" -ge 1 ] || die "LINEA_MULTI_GPU_MEASURE: expected at least 1 measured step, got $measure"
for model in $scaling_models $large_model; do
  [ -f "$root/configs/models/$model.toml" ] || die "no model config configs/models/$model.toml"
done

linea=${LINEA_BIN:-}
if [ -z "$linea" ]; then
  for dir in build-gpu build; do
    if [ -x "$root/$dir/linea" ]; then
      linea=$root/$dir/linea
      break
    fi
  done
fi
[ -n "$linea" ] && [ -x "$linea" ] || die "no linea binary: set LINEA_BIN, or build build-gpu/linea (scripts/gpu.sh)"
prefix=${LINEA_GPU_PREFIX:-/tmp/linea-deps}
[ -d "$prefix/usr/lib/x86_64-linux-gnu" ] &&
  export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

if [ -n "${LINEA_GPUS:-}" ]; then
  gpus=$LINEA_GPUS
elif [ "$device" = cuda ]; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
else
  die "LINEA_GPUS: set the number of ranks to use with LINEA_MULTI_GPU_DEVICE=cpu"
fi
[[ $gpus =~ ^[0-9]+$ ]] && [ "$gpus" -ge 1 ] || die "LINEA_GPUS: expected a GPU count >= 1, got '$gpus'"

out=${LINEA_MULTI_GPU_OUT:-$PWD/multi-gpu-out}
if [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then
  die "LINEA_MULTI_GPU_OUT: $out is not empty (results are never overwritten; name a new folder)"
fi
mkdir -p "$out/runs" "$out/logs" "$out/configs" || die "cannot create $out"
results=$out/results.jsonl
report=$out/report.md
: >"$results"

# NVLink multicast stays off on the shared hosts (the device library's KINDS.md), also in the
# ranks that mpirun starts.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mpi_env=(-x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS)
[ -n "${LD_LIBRARY_PATH:-}" ] && mpi_env+=(-x LD_LIBRARY_PATH)
failures=0
say() { echo "[multi-gpu.sh] $*" >&2; }
emit() {  # one JSON object: into results.jsonl and onto stdout
  echo "$1" >>"$results"
  echo "$1"
}
late() { [ "$deadline" -gt 0 ] && [ $(($(date +%s) - start_time)) -ge "$deadline" ]; }

# train NAME NP CONFIG OVERRIDES...: one `linea train` job of NP ranks into runs/NAME, its output
# in logs/NAME.log (appended: a resumed job adds to its first part). Returns the job's status;
# 124 when it was ended after LINEA_MULTI_GPU_RUN_TIMEOUT_S. The ranks run unbound (mpirun binds
# each of 1 or 2 ranks to one core by default), so each initialises its parameters on its share of
# the cores.
train() {
  local name=$1 np=$2 config=$3
  shift 3
  local log=$out/logs/$name.log
  say "$name: $np rank(s): linea train $(basename "$config") $*"
  local job_start=$(date +%s)
  timeout --kill-after=20 "$run_timeout" \
    mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np" \
    "${mpi_env[@]}" \
    "$linea" train "$config" device="$device" "${precision[@]}" run.dir="$out/runs" run.name="$name" \
    data.path="$data" "${extra_overrides[@]}" "$@" >>"$log" 2>&1
  local status=$?
  say "$name: exit status $status after $(($(date +%s) - job_start)) s"
  return $status
}

# Rank 0's "peak GPU memory X GiB" from a job's summary ("null" where the log has none, as on the cpu).
peak_gib() {
  local gib
  gib=$(sed -n 's/.*peak GPU memory \([0-9.]*\) GiB.*/\1/p' "$1" | tail -1)
  echo "${gib:-null}"
}

# A JSON field of a one-line object (the numbers and booleans that linea prints).
field() { sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" <<<"$1"; }
sci() { awk -v x="$1" 'BEGIN { printf "%.2e", x }'; }  # a number for the tables
shown() { [ "$1" = null ] && echo – || echo "$1"; }    # a JSON value for the tables

# ---- layouts ---------------------------------------------------------------------------------------
layouts=()  # "tp dp"
for layout in "1 2" "2 1" "2 2" "1 4" "2 4" "1 8"; do
  read -r tp dp <<<"$layout"
  [ $((tp * dp)) -le "$gpus" ] && layouts+=("$layout")
done
say "$gpus GPU(s), device $device, linea $linea, results in $out"

correctness_rows=()
# compare LAYOUT_NAME PART TP DP RUN: the run against the one-GPU run, as a result line and a row.
compare() {
  local label=$1 part=$2 tp=$3 dp=$4 run=$5 line
  line=$("$linea" compare-runs "$out/runs/one" "$out/runs/$run" --tolerance "$tolerance" 2>>"$out/logs/compare.log")
  local status=$?
  if [ -z "$line" ]; then
    emit "{\"part\":\"$part\",\"layout\":\"$label\",\"tp\":$tp,\"dp\":$dp,\"pass\":false,\"error\":\"no comparison (see logs/compare.log)\"}"
    correctness_rows+=("| $part | $label | – | – | – | FAIL (no comparison) |")
    failures=$((failures + 1))
    return
  fi
  emit "{\"part\":\"$part\",\"layout\":\"$label\",\"tp\":$tp,\"dp\":$dp,${line#\{}"
  [ $status -eq 0 ] || failures=$((failures + 1))
  correctness_rows+=("| $part | $label | $(field "$line" steps) | $(sci "$(field "$line" max_abs_dloss)") | $(sci "$(field "$line" max_rel_dloss)") | $([ $status -eq 0 ] && echo pass || echo FAIL) |")
}

# failed PART LABEL STATUS LOG: a job that did not finish, as a result line and a row.
failed() {
  emit "{\"part\":\"$1\",\"layout\":\"$2\",\"pass\":false,\"exit_status\":$3,\"log\":\"$4\"}"
  correctness_rows+=("| $1 | $2 | – | – | – | FAIL (exit status $3, $4) |")
  failures=$((failures + 1))
}
skipped() {
  emit "{\"part\":\"$1\",\"layout\":\"$2\",\"skipped\":\"$3\"}"
  correctness_rows+=("| $1 | $2 | – | – | – | skipped: $3 |")
}

have_one=0  # 1: the one-GPU run is there; 2: it failed
one_gpu_reference() {
  [ $have_one = 0 ] || return $((have_one - 1))
  train one 1 "$correctness_config" parallel.tp=1
  local status=$?
  have_one=$([ $status -eq 0 ] && echo 1 || echo 2)
  if [ $status -eq 0 ]; then
    compare 1x1 correctness 1 1 one  # the reference against itself: its steps and final loss
    return 0
  fi
  failed correctness 1x1 $status logs/one.log
  return 1
}

for part in $parts; do
  case "$part" in
    correctness)
      one_gpu_reference || continue
      for layout in "${layouts[@]}"; do
        read -r tp dp <<<"$layout"
        name=tp${tp}_dp${dp}
        if late; then
          skipped correctness "${tp}x${dp}" deadline
          continue
        fi
        if train "$name" $((tp * dp)) "$correctness_config" parallel.tp="$tp" parallel.dp="$dp"; then
          compare "${tp}x${dp}" correctness "$tp" "$dp" "$name"
        else
          failed correctness "${tp}x${dp}" $? "logs/$name.log"
        fi
      done
      ;;
    resume)
      if [ -n "$resume_layouts" ]; then
        read -r first second <<<"$resume_layouts"
        from=(${first/x/ }) to=(${second/x/ })
        if [ $((from[0] * from[1])) -gt "$gpus" ] || [ $((to[0] * to[1])) -gt "$gpus" ]; then
          skipped resume "$first→$second" "more ranks than the $gpus GPU(s)"
          continue
        fi
      elif [ "$gpus" -ge 4 ]; then
        from=(2 2) to=(1 4)
      elif [ "$gpus" -ge 2 ]; then
        from=(1 2) to=(2 1)
      else
        skipped resume - "one GPU: no second layout"
        continue
      fi
      label="${from[0]}x${from[1]}→${to[0]}x${to[1]}"
      if late; then
        skipped resume "$label" deadline
        continue
      fi
      one_gpu_reference || continue
      name=resume
      train $name $((from[0] * from[1])) "$correctness_config" parallel.tp="${from[0]}" parallel.dp="${from[1]}" \
        train.stop_at=10 &&
        train $name $((to[0] * to[1])) "$correctness_config" parallel.tp="${to[0]}" parallel.dp="${to[1]}"
      status=$?
      if [ $status -ne 0 ]; then
        failed resume "$label" $status logs/$name.log
        continue
      fi
      # The second job must have resumed from the first one's checkpoint, not started over.
      if ! grep -q "steps 10 → 20 of 20" "$out/logs/$name.log"; then
        emit "{\"part\":\"resume\",\"layout\":\"$label\",\"pass\":false,\"error\":\"the second job did not resume from step 10 (logs/$name.log)\"}"
        correctness_rows+=("| resume | $label | – | – | – | FAIL (did not resume from step 10) |")
        failures=$((failures + 1))
        continue
      fi
      compare "$label" resume "${to[0]}" "${to[1]}" $name
      ;;
    scaling | large)
      ;;  # below: they share the throughput runs' table
  esac
done

# ---- throughput: scaling and the large model ---------------------------------------------------------
scaling_rows=()
# throughput_run PART MODEL TP DP MICRO: one timed job of the model and its result line; sets
# per_gpu to its tokens/s per GPU and peak to rank 0's peak GPU memory in GiB (empty when the job
# failed or was skipped).
throughput_run() {
  local part=$1 model=$2 tp=$3 dp=$4 micro_seqs=$5
  local np=$((tp * dp)) name=${part}_${model}_tp${tp}_dp${dp}
  local config=$out/configs/$model.toml
  [ -f "$config" ] || cat "$root/configs/multi-gpu/scaling.toml" "$root/configs/models/$model.toml" >"$config"
  per_gpu= peak=
  local head="\"part\":\"$part\",\"model\":\"$model\",\"gpus\":$np,\"tp\":$tp,\"dp\":$dp,\"seq_len\":$seq_len"
  if late; then
    emit "{$head,\"skipped\":\"deadline\"}"
    return
  fi
  train "$name" "$np" "$config" parallel.tp="$tp" parallel.dp="$dp" train.seq_len="$seq_len" \
    train.batch_seqs=$((seqs * dp)) train.micro_batch_seqs="$micro_seqs" train.steps=$((warmup + measure))
  local status=$?
  if [ $status -ne 0 ]; then
    emit "{$head,\"ok\":false,\"exit_status\":$status,\"log\":\"logs/$name.log\"}"
    failures=$((failures + 1))
    return
  fi
  local line
  line=$("$linea" throughput "$out/runs/$name" --warmup "$warmup" 2>>"$out/logs/throughput.log")
  local tokens_per_s
  tokens_per_s=$(field "$line" tokens_per_s)
  if [ -z "$tokens_per_s" ]; then
    emit "{$head,\"ok\":false,\"error\":\"no throughput (see logs/throughput.log)\"}"
    failures=$((failures + 1))
    return
  fi
  per_gpu=$(awk -v t="$tokens_per_s" -v n="$np" 'BEGIN { printf "%.1f", t / n }')
  peak=$(peak_gib "$out/logs/$name.log")
  emit "{$head,\"ok\":true,\"tokens_per_s\":$tokens_per_s,\"tokens_per_s_per_gpu\":$per_gpu,\"mean_step_s\":$(field "$line" mean_step_s),\"peak_gib_rank0\":$peak}"
}

# efficiency_row MODEL MODE GPUS TP DP PER_GPU BASE TARGET: weak-scaling efficiency against 1 GPU.
efficiency_row() {
  local model=$1 mode=$2 np=$3 tp=$4 dp=$5 per_gpu=$6 base=$7 target=$8
  local efficiency meets
  efficiency=$(awk -v a="$per_gpu" -v b="$base" 'BEGIN { printf "%.3f", a / b }')
  meets=$(awk -v e="$efficiency" -v t="$target" 'BEGIN { print (e >= t) ? "true" : "false" }')
  emit "{\"part\":\"scaling_efficiency\",\"model\":\"$model\",\"mode\":\"$mode\",\"gpus\":$np,\"tp\":$tp,\"dp\":$dp,\"tokens_per_s_per_gpu\":$per_gpu,\"one_gpu_tokens_per_s\":$base,\"efficiency\":$efficiency,\"target\":$target,\"meets_target\":$meets}"
  scaling_rows+=("| $model | $mode | $np | ${tp}×${dp} | $per_gpu | $(shown "$peak") | $efficiency | $([ "$np" -eq 8 ] && echo "≥ $target: $meets") |")
}

large_rows=()
for part in $parts; do
  case "$part" in
    scaling)
      for model in $scaling_models; do
        throughput_run scaling "$model" 1 1 "$micro"
        base=$per_gpu
        if [ -z "$base" ]; then
          scaling_rows+=("| $model | – | 1 | 1×1 | failed or skipped | – | – | |")
          continue
        fi
        scaling_rows+=("| $model | – | 1 | 1×1 | $base | $(shown "$peak") | 1.000 | |")
        for np in 2 4 8; do
          [ "$np" -le "$gpus" ] || break
          for tp in 1 2; do
            mode=$([ $tp = 1 ] && echo dp || echo tp2)
            target=$([ $tp = 1 ] && echo 0.95 || echo 0.85)
            throughput_run scaling "$model" $tp $((np / tp)) "$micro"
            if [ -n "$per_gpu" ]; then
              efficiency_row "$model" $mode "$np" $tp $((np / tp)) "$per_gpu" "$base" "$target"
            else
              scaling_rows+=("| $model | $mode | $np | ${tp}×$((np / tp)) | failed or skipped | – | – | |")
            fi
          done
        done
      done
      ;;
    large)
      tp=$((large_tp < gpus ? large_tp : gpus))
      dp=$((gpus / tp))
      params=$("$linea" params "$root/configs/models/$large_model.toml" 2>/dev/null | awk '$1 == "total" { print $4 }')
      throughput_run large "$large_model" "$tp" "$dp" "$large_micro"
      large_rows+=("| $large_model | ${tp}×${dp} | ${params:-?} | ${per_gpu:-failed or skipped} | $(shown "${peak:-null}") |")
      ;;
  esac
done

# ---- report ----------------------------------------------------------------------------------------
{
  echo "# Multi-GPU checks: $gpus GPU(s), device $device ($(date -u '+%Y-%m-%d %H:%M UTC'))"
  echo
  echo "linea: \`$linea\`; every line of results.jsonl in this folder; job logs in logs/."
  if [ ${#correctness_rows[@]} -gt 0 ]; then
    echo
    echo "## Loss against the 1-GPU run ($(basename "$correctness_config"), relative tolerance $tolerance)"
    echo
    echo "| part | TP×DP | steps | max \|Δloss\| | max \|Δloss\|/loss | verdict |"
    echo "|---|---|---|---|---|---|"
    printf '%s\n' "${correctness_rows[@]}"
  fi
  if [ ${#scaling_rows[@]} -gt 0 ]; then
    echo
    echo "## Weak scaling: context $seq_len, $seqs sequences per DP replica per step, $measure steps after $warmup"
    echo
    echo "| model | mode | GPUs | TP×DP | tokens/s per GPU | peak GiB (rank 0) | efficiency vs 1 GPU | target at 8 GPUs |"
    echo "|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${scaling_rows[@]}"
  fi
  if [ ${#large_rows[@]} -gt 0 ]; then
    echo
    echo "## Large model under TP: context $seq_len, $seqs sequences per DP replica per step"
    echo
    echo "| model | TP×DP | parameters | tokens/s per GPU | peak GiB (rank 0) |"
    echo "|---|---|---|---|---|"
    printf '%s\n' "${large_rows[@]}"
  fi
} >"$report"
cat "$report" >&2
say "$failures failure(s) in $(($(date +%s) - start_time)) s; results in $results, tables in $report"
[ "$failures" -eq 0 ]
