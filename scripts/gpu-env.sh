#!/usr/bin/env bash
# Sourced on a device machine by scripts/gpu.sh and bench/tokenizer_throughput.sh: unpacks the
# Debian packages that machine lacks (.deb files in $LINEA_GPU_DEBS, default .gpu-deps; skipped when
# absent) with `dpkg -x` into $LINEA_GPU_PREFIX (default /tmp/linea-deps), never into /, and points
# CMAKE_PREFIX_PATH, PKG_CONFIG_PATH and LD_LIBRARY_PATH at them; leaves in the array `cmake_args`
# what CMake's configure step needs on that machine. Expects `root` (the checkout) to be set.

debs=${LINEA_GPU_DEBS:-$root/.gpu-deps}
prefix=${LINEA_GPU_PREFIX:-/tmp/linea-deps}
multiarch=x86_64-linux-gnu
if [ -d "$debs" ]; then
  echo "[gpu-env] unpacking $(ls "$debs"/*.deb | wc -l) packages from $debs into $prefix"
  mkdir -p "$prefix"
  for deb in "$debs"/*.deb; do dpkg -x "$deb" "$prefix" || exit 1; done
  # The packages name their install prefix /usr in a few places: point those at $prefix/usr.
  sed -i "s|\"/usr/share/glog/cmake\"|\"$prefix/usr/share/glog/cmake\"|" \
    "$prefix/usr/lib/$multiarch/cmake/glog/glog-modules.cmake" 2>/dev/null
  for pc in "$prefix"/usr/lib/$multiarch/pkgconfig/*.pc; do
    [ -f "$pc" ] && sed -i "s|^prefix=/usr\$|prefix=$prefix/usr|" "$pc"
  done
fi
export CMAKE_PREFIX_PATH="$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export PKG_CONFIG_PATH="$prefix/usr/lib/$multiarch/pkgconfig:$prefix/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$prefix/usr/lib/$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# OpenBLAS: CMakeLists.txt asks pkg-config for `openblas`; Debian and Ubuntu keep that file in a
# folder per threading flavour (openblas-openmp, openblas-pthread). Add those folders, and when
# none holds an openblas.pc, describe the installed library in one.
for dir in /usr/lib/$multiarch/openblas-*/pkgconfig; do
  [ -d "$dir" ] && PKG_CONFIG_PATH="$PKG_CONFIG_PATH:$dir"
done
if ! pkg-config --exists openblas; then
  lib=$(ls /usr/lib/$multiarch/libopenblas.so /usr/lib/$multiarch/openblas-*/libopenblas.so 2>/dev/null | head -1)
  header=$(ls /usr/include/$multiarch/openblas-*/cblas.h /usr/include/openblas/cblas.h /usr/include/cblas.h \
    2>/dev/null | head -1)
  if [ -n "$lib" ] && [ -n "$header" ]; then
    echo "[gpu-env] writing openblas.pc for $lib ($header)"
    mkdir -p "$prefix/pkgconfig"
    printf 'Name: openblas\nDescription: OpenBLAS (found by scripts/gpu-env.sh)\nVersion: 0\nLibs: -L%s -lopenblas\nCflags: -I%s\n' \
      "$(dirname "$lib")" "$(dirname "$header")" >"$prefix/pkgconfig/openblas.pc"
  fi
fi
export PKG_CONFIG_PATH

# HDF5 (serial): FindHDF5 asks the h5cc wrapper, which Ubuntu ships separately (hdf5-helpers);
# without it, name the serial installation's root.
cmake_args=()
if ! command -v h5cc >/dev/null && [ -d /usr/lib/$multiarch/hdf5/serial ]; then
  cmake_args+=(-DHDF5_ROOT=/usr/lib/$multiarch/hdf5/serial)
fi
