#!/usr/bin/env bash
# The main job: installs dependencies, builds linea, and trains the default small model
# (configs/default.toml) on the embedded corpus, on the GPU when there is one, else on the CPU.
# Arguments are passed to `linea train`, e.g. train.steps=100.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
cd "$root"
exec ./build/linea train configs/default.toml "$@"
