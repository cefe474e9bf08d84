#!/usr/bin/env bash
# Configures and builds linea into build/ (or $LINEA_BUILD_DIR). Extra arguments go to cmake's
# configure step, e.g. -DLINEA_CUDA=OFF. CUDA is compiled when nvcc is found. LINEA_TARGETS (space
# separated) builds only those targets; LINEA_BUILD_TYPE sets the build type of a new build folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${LINEA_BUILD_DIR:-$root/build}
jobs=${LINEA_JOBS:-$(nproc)}
# ccache keys on paths relative to the checkout, so a fresh clone elsewhere reuses the cache.
# Without hashing the build folder's path (which only the debug info's compilation directory
# holds), checkouts at other paths (git worktrees) share the cache too.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=${LINEA_BUILD_TYPE:-RelWithDebInfo} "$@"
elif [ $# -gt 0 ]; then
  cmake "$build" "$@"
fi
targets=()
for t in ${LINEA_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" -j "$jobs" "${targets[@]}"
