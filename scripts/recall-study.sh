#!/usr/bin/env bash
# Issue 19's GPU studies within a wall-time budget, on one GPU: the MQAR sweep over mixers x width
# and the reduced-scale recall study (pure and 3:1 of every linear mixer and the Transformer, then
# `linea eval` recall tasks on each). Every run's steps come from a short probe of its step time on
# the machine itself; deadlines stop whatever is still going, so the study ends within --budget.
# The orchestration, tables and SVG plot are scripts/recall_study.py (python3, standard library
# only); its header says how the budget is split and why. docs/studies.md ("Running the recall
# studies on one GPU") has the commands and the files written.
#   scripts/recall-study.sh mqar   --linea build-gpu/linea --out OUT/mqar   [--budget 360] [--jobs 16]
#   scripts/recall-study.sh recall --linea build-gpu/linea --out OUT/recall [--budget 360] [--jobs 11]
#   scripts/recall-study.sh report OUT/recall        # rebuild the tables and plot from OUT/recall/runs
# Options: --steps N (fixed, no probe), --runs REGEX, --set KEY=VALUE (every run), --device cpu,
# --work DIR (checkpoints; default /tmp/linea-recall-study/STUDY), --dry-run; --help lists all.
set -euo pipefail
exec python3 "$(dirname "$0")/recall_study.py" "$@"
