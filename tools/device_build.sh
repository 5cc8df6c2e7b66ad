#!/usr/bin/env bash
# Builds Sluice on the lent GPU machine (no package registry there): unpacks the Debian -dev
# packages carried in .devdeps/ (fetched here with `apt-get download`, see docs/DEVICE.md) into a
# private prefix, configures with CUDA, and builds into build-device/. Used through the device tool.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=/opt/sluice-deps
mkdir -p "$prefix"
for deb in .devdeps/*.deb; do dpkg -x "$deb" "$prefix"; done
export CMAKE_PREFIX_PATH="$prefix/usr"
export PKG_CONFIG_PATH="$prefix/usr/lib/x86_64-linux-gnu/pkgconfig:$prefix/usr/share/pkgconfig"
# The .pc files say prefix=/usr; the sysroot makes their -I/-L point into the private prefix.
export PKG_CONFIG_SYSROOT_DIR="$prefix"
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DSLUICE_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90a-real -DGTest_DIR="$prefix/usr/lib/x86_64-linux-gnu/cmake/GTest" \
      -DCMAKE_INCLUDE_PATH="$prefix/usr/include" >/dev/null
cmake --build build-device -j "$(nproc)" --target sluice_tests sluice_cuda_tests sluice_bench_quant sluice_cli cuda_bench_attention cuda_bench_matmul
