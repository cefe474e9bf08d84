#!/usr/bin/env bash
# Installs every build and runtime dependency of linea from Debian packages.
# Idempotent: packages already present are skipped by apt-get.
set -euo pipefail
packages=(
  build-essential cmake ninja-build ccache pkg-config
  libopenmpi-dev openmpi-bin
  libhdf5-dev
  libboost-dev libboost-system-dev
  libgoogle-glog-dev
  libgtest-dev libgmock-dev
  libtomlplusplus-dev nlohmann-json3-dev
  libopenblas-openmp-dev
  libsentencepiece-dev
  zlib1g-dev libzstd-dev libsnappy-dev
  dict-gcide
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "[install-deps] installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
