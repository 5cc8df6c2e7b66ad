#!/usr/bin/env bash
# Packs what an end-to-end run on the lent GPU machine needs into parts small enough to carry (the
# device tool takes at most 64 MiB per call, working tree included): a CUDA build's `sluice` and
# `sluice_cuda_tests` with the shared libraries they load that the machine's image lacks,
# ../shared/testdata/llamacpp-tiny, the real test models of .cache/models, and any extra files
# named after the build dir (e.g. a llama.cpp CUDA llama-bench). docs/DEVICE.md says how the parts
# travel and are put together there.
#   tools/device_payload.sh [--bin-only] BUILD_DIR [EXTRA_FILE…]   → BUILD_DIR/devrun/part00, …
# --bin-only leaves out the test data and models (one part: a run that makes its own models).
set -euo pipefail
cd "$(dirname "$0")/.."
bin_only=0
if [ "${1:-}" = "--bin-only" ]; then bin_only=1; shift; fi
build=${1:?usage: tools/device_payload.sh [--bin-only] BUILD_DIR [EXTRA_FILE...]}
shift
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/payload/bin" "$stage/payload/lib" "$stage/payload/models"
cp "$build/sluice" "$stage/payload/bin/"
[ -f "$build/tests/sluice_cuda_tests" ] && cp "$build/tests/sluice_cuda_tests" "$stage/payload/bin/"
for extra in "$@"; do cp "$extra" "$stage/payload/bin/"; done
# Every library sluice loads but the C/C++ runtime, which the machine's newer image has.
ldd "$build/sluice" | awk '/=> \//{print $3}' |
  grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/payload/lib/"; done
cp /usr/lib/x86_64-linux-gnu/libbenchmark.so.1debian "$stage/payload/lib/" 2>/dev/null || true
if [ "$bin_only" = 0 ]; then
  [ -d ../shared/testdata/llamacpp-tiny ] && cp -r ../shared/testdata/llamacpp-tiny "$stage/payload/"
  cp .cache/models/*.gguf "$stage/payload/models/" 2>/dev/null || true
fi
rm -rf "$build/devrun"
mkdir -p "$build/devrun"
tar -C "$stage" -czf - payload | split -b 56m -d - "$stage/payload.tgz."
for part in "$stage"/payload.tgz.*; do
  dir="$build/devrun/part${part##*.}"
  mkdir -p "$dir"
  mv "$part" "$dir/"
done
ls -d "$build"/devrun/part*
