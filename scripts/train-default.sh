#!/usr/bin/env bash
# The main job: installs dependencies, builds linea, and trains the default small model
# (configs/default.toml) on the embedded corpus, on the GPU when there is one, else on the CPU.
# Without a visible GPU it builds the CPU-only configuration into build-cpu/ (no nvcc time spent on
# kernels it cannot run; build/ stays the full build). Only the `linea` target is built.
# Arguments are passed to `linea train`, e.g. train.steps=100.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  build=$root/build
  LINEA_TARGETS=linea "$root/scripts/build.sh"
else
  build=$root/build-cpu
  echo "[train-default] no GPU visible: building the CPU-only configuration into build-cpu/ and training on the CPU"
  LINEA_BUILD_DIR=$build LINEA_TARGETS=linea "$root/scripts/build.sh" -DLINEA_CUDA=OFF
fi
cd "$root"
exec "$build/linea" train configs/default.toml "$@"
